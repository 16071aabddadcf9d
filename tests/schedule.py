"""Pytest plugin: in a parallel run (pytest-xdist, `make test`), the longest test files start first.

Files go to workers whole (`--dist loadfile`), in collection order. A file that runs for minutes (the soak
tests) handed out last would run alone at the end while the other workers sit idle, so each worker
collects the files longest first, by their times in tests/durations.json; a file not in it counts as
`UNKNOWN_S`. Tests within a file keep their order. A serial run keeps the plain order.

`pytest --store-durations` (serial or parallel) writes this run's times per file back to durations.json.
"""

import json
import os
from collections import defaultdict
from pathlib import Path

import pytest

DURATIONS = Path(__file__).resolve().parent / "durations.json"
UNKNOWN_S = 10.0
_spent: dict[str, float] = defaultdict(float)


def pytest_addoption(parser):
    parser.addoption("--store-durations", action="store_true",
                     help=f"write each test file's time in this run to {DURATIONS.name}")


def known_durations() -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(DURATIONS.read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def longest_first(items: list, durations: dict[str, float]) -> list:
    files: dict[str, list] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    order = sorted(files, key=lambda name: -durations.get(name, UNKNOWN_S))  # stable: ties keep their order
    return [item for name in order for item in files[name]]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items[:] = longest_first(items, known_durations())


def pytest_runtest_logreport(report):
    _spent[report.nodeid.split("::", 1)[0]] += report.duration


def pytest_sessionfinish(session):
    if not session.config.getoption("store_durations") or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    merged = {**known_durations(), **{name: round(spent, 1) for name, spent in _spent.items()}}
    DURATIONS.write_text(json.dumps(dict(sorted(merged.items())), indent=1) + "\n")
