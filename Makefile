# Two commands on a fresh Debian/Ubuntu machine: `make run` and `make test`.
# Both install what is missing first (system packages, virtualenv, the cached
# llama.cpp RPC builds), so they work on a fresh clone.
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: run test lint setup setup-test vulkan arm build simlan-up simlan-down clean

run: setup
	$(PY) manage.py runpanel

# Two more pytest workers than cores, each with its own Redis and simulated LAN, taking whole test files, the
# longest first (tests/schedule.py): the longest files mostly wait, and beside them the others keep the cores
# busy (docs/benchmarks.md, "The whole suite on two workers"). TEST_WORKERS=0 runs the tests one by one.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 2 )))
# More pytest options, e.g. `make test PYTEST_ARGS=--store-durations` to refresh tests/durations.json.
PYTEST_ARGS ?=

test: setup-test
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

lint: setup-test
	$(VENV)/bin/ruff check .

setup:
	@bash scripts/setup.sh

setup-test:
	@bash scripts/setup.sh --test

# The laptops' runtime with llama.cpp's Vulkan backend, for laptops with a GPU (about 2 minutes, once);
# `make test` does it too. Laptops installed before get it with "Install runtime".
vulkan:
	@bash scripts/setup.sh --vulkan

# The laptops' runtime for 64-bit ARM Linux (Raspberry Pi 5, ARM laptops), cross-compiled from the same source
# (4 to 6 min on 2 cores, once); `make test` does it too. ARM laptops then get it with "Install runtime".
arm:
	@bash scripts/setup.sh --arm

# Only the llama.cpp builds (wheel + laptop runtime bundle), e.g. for CI caches.
build:
	@$(PY) scripts/build_llama.py --print runtime

simlan-up: setup
	$(PY) manage.py simlan up 3

simlan-down: setup
	$(PY) manage.py simlan down

# Removes the virtualenv and collected files; the data folder and the build cache stay.
clean:
	rm -rf $(VENV) var/static .pytest_cache
