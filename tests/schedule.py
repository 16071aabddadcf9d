"""Pytest plugin: how a parallel run (pytest-xdist, `make test`: `-n auto`) shares the tests.

Two workers on two cores. llama.cpp's threads wait for each other by spinning (OpenMP), so two tests that each
run a model across the simulated laptops at once take three to five times as long as one after the other
(measured: a 30-turn chat 85 s alone, 438 s beside another). So:

* every file with a test whose fixtures run rpc-servers (`cluster`, `supervisor`) is in one group, "llama",
  which one worker runs file after file, while the other worker takes every other file whole (the files are
  listed in tests/llama_files.txt, as the controller, which hands out the work, collects nothing; a test
  checks the list);
* the soak tests, which mostly wait on laptops held to a sliver of a core, are not in it: they overlap the
  llama group instead;
* files go out longest first (their times in tests/durations.json; a file not in it counts as `UNKNOWN_S`), the
  llama group before all, so no long file starts last and runs alone. Tests within a file keep their order.

A serial run keeps the plain order. `pytest --store-durations` writes this run's times per file back to
durations.json, and the llama files to llama_files.txt.
"""

import json
import os
from collections import defaultdict
from pathlib import Path

import pytest

DURATIONS = Path(__file__).resolve().parent / "durations.json"
LLAMA_FILES = Path(__file__).resolve().parent / "llama_files.txt"
UNKNOWN_S = 10.0
LLAMA = "llama"
RUNS_SERVERS = {"cluster", "supervisor"}
# Files that run rpc-servers but mostly wait: laptops slowed to a sliver of a core for minutes, or a minute of
# waiting for the supervisor to notice a stranded job (a fifth to a third of the machine busy, serially).
WAITING = {"tests/jobs/test_idle_pages.py", "tests/jobs/test_long_answers.py", "tests/jobs/test_lost_messages.py"}
_spent: dict[str, float] = defaultdict(float)


def pytest_addoption(parser):
    parser.addoption("--store-durations", action="store_true",
                     help=f"write each test file's time in this run to {DURATIONS.name}")


def known_durations() -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(DURATIONS.read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def file_of(item) -> str:
    return item.nodeid.split("::", 1)[0]


def uses_servers(item) -> bool:
    return bool(RUNS_SERVERS & set(item.fixturenames)) and file_of(item) not in WAITING


def llama_files(items: list) -> set[str]:
    return {file_of(item) for item in items if uses_servers(item)}


def listed_llama_files() -> set[str]:
    try:
        return {line.strip() for line in LLAMA_FILES.read_text().splitlines() if line.strip()}
    except OSError:
        return set()


def longest_first(items: list, durations: dict[str, float]) -> list:
    """The llama group's files, then every other file, each part longest first."""
    files: dict[str, list] = {}
    for item in items:
        files.setdefault(file_of(item), []).append(item)
    in_llama = llama_files(items)
    order = sorted(files, key=lambda name: (name not in in_llama, -durations.get(name, UNKNOWN_S)))
    return [item for name in order for item in files[name]]


def in_a_worker() -> bool:
    return bool(os.environ.get("PYTEST_XDIST_WORKER"))


def pytest_xdist_make_scheduler(config, log):
    """xdist's per-file scheduling, the llama files one unit. (Its own `--dist loadgroup` marks do not reach
    the controller under pytest 9: the tests of one group went to both workers.)"""
    from xdist.scheduler import LoadScopeScheduling

    llama = listed_llama_files()

    class FilesAndTheLlamaGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid, llama)

    return FilesAndTheLlamaGroup(config, log)


def unit_of(nodeid: str, llama: set[str]) -> str:
    """The unit of work a test goes out in: its file, or the llama group."""
    name = nodeid.split("::", 1)[0]
    return LLAMA if name in llama else name


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    if in_a_worker():
        items[:] = longest_first(items, known_durations())


def pytest_runtest_logreport(report):
    _spent[report.nodeid.split("::", 1)[0]] += report.duration


def pytest_sessionfinish(session):
    if not session.config.getoption("store_durations") or in_a_worker():
        return
    merged = {**known_durations(), **{name: round(spent, 1) for name, spent in _spent.items()}}
    DURATIONS.write_text(json.dumps(dict(sorted(merged.items())), indent=1) + "\n")
    if session.items:  # a serial run collected them (in a parallel run, the workers did)
        LLAMA_FILES.write_text("".join(f"{name}\n" for name in sorted(llama_files(session.items))))
