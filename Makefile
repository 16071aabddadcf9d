# Two commands on a fresh Debian/Ubuntu machine: `make run` and `make test`.
# Both install what is missing first (system packages, virtualenv, the cached
# llama.cpp RPC builds), so they work on a fresh clone.
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: run test lint setup setup-test build simlan-up simlan-down clean

run: setup
	$(PY) manage.py runpanel

# TEST_WORKERS=auto: one pytest worker per core, each taking whole test files (their fixtures stay per file),
# the files that run models across the laptops one after the other, the longest first (tests/schedule.py;
# xdist would otherwise hand out the files with the most tests first): 32 min against 43 on two cores
# (docs/benchmarks.md). Not the default: beside other tests the soak tests, slowed by a CPU quota, stretch
# from 3 to 11-14 minutes and fail, and the model-running tests take 1.5 times as long.
TEST_WORKERS ?= 0

test: setup-test
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

lint: setup-test
	$(VENV)/bin/ruff check .

setup:
	@bash scripts/setup.sh

setup-test:
	@bash scripts/setup.sh --test

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
