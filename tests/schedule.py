"""Pytest plugin: how a parallel run (pytest-xdist, `make test`) shares the tests.

`make test` runs two more workers than the machine has cores, each taking whole files (their fixtures stay per
file), the longest first, so no long file starts last and runs alone. More workers than cores because the longest
files mostly wait: the two soak tests hold their laptops to a sliver of a core for minutes, and others wait out a
timeout; beside them, the other workers keep both cores busy.

Files that run the model across simulated laptops may run side by side: each simulated laptop has one core of
its own (nodes/simcpu.give_one_core), so no rpc-server's threads spin waiting for one preempted by another test.

A serial run keeps the plain order. `pytest --store-durations` writes this run's times per file back to
durations.json. Every run ends with its slowest files and each file over FILE_BUDGET_S, so a change sees its cost.
"""

import json
import os
from collections import defaultdict
from pathlib import Path

import pytest

DURATIONS = Path(__file__).resolve().parent / "durations.json"
UNKNOWN_S = 10.0
SLOWEST_SHOWN = 15
# A file past this holds one worker for a tenth of the suite's 20 minutes: split it, share its set-up, or shorten
# the timeouts it waits out.
FILE_BUDGET_S = 150.0
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


def longest_first(items: list, durations: dict[str, float]) -> list:
    """Whole files, longest first (a file not in `durations` counts as UNKNOWN_S); tests keep their order."""
    files: dict[str, list] = {}
    for item in items:
        files.setdefault(file_of(item), []).append(item)
    order = sorted(files, key=lambda name: -durations.get(name, UNKNOWN_S))
    return [item for name in order for item in files[name]]


def in_a_worker() -> bool:
    return bool(os.environ.get("PYTEST_XDIST_WORKER"))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    # The controller hands out files in the order its workers collected them (--no-loadscope-reorder).
    if in_a_worker():
        items[:] = longest_first(items, known_durations())


def pytest_runtest_logreport(report):
    _spent[report.nodeid.split("::", 1)[0]] += report.duration


def by_directory(spent: dict[str, float]) -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    for name, seconds in spent.items():
        totals[name.rsplit("/", 1)[0]] += seconds
    return totals


def pytest_terminal_summary(terminalreporter):
    if in_a_worker() or not _spent:
        return
    write = terminalreporter.write_line
    terminalreporter.section(f"the {SLOWEST_SHOWN} slowest test files (seconds, set-up included)")
    for name, seconds in sorted(_spent.items(), key=lambda pair: -pair[1])[:SLOWEST_SHOWN]:
        write(f"{seconds:8.1f}  {name}")
    over = {name: seconds for name, seconds in _spent.items() if seconds > FILE_BUDGET_S}
    write(f"files over {FILE_BUDGET_S:.0f} s: " + (", ".join(f"{name} ({seconds:.0f} s)" for name, seconds in
                                                            sorted(over.items(), key=lambda pair: -pair[1])) or "none"))
    write("by directory: " + ", ".join(f"{name} {seconds:.0f} s" for name, seconds in
                                       sorted(by_directory(_spent).items(), key=lambda pair: -pair[1])))


def pytest_sessionfinish(session):
    if not session.config.getoption("store_durations") or in_a_worker():
        return
    merged = {**known_durations(), **{name: round(spent, 1) for name, spent in _spent.items()}}
    DURATIONS.write_text(json.dumps(dict(sorted(merged.items())), indent=1) + "\n")
