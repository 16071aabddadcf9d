"""`make test`'s workers take the longest test files first (tests/schedule.py), so none runs alone at the end."""

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

from tests import schedule

ROOT = Path(__file__).resolve().parents[2]


def items(*nodeids: str) -> list:
    """Stand-ins for collected tests."""
    return [SimpleNamespace(nodeid=nodeid) for nodeid in nodeids]


def test_files_go_longest_first_and_tests_keep_their_order_within_a_file():
    found = schedule.longest_first(items("a.py::one", "b.py::one", "a.py::two", "c.py::one", "b.py::two"),
                                   {"a.py": 5.0, "b.py": 300.0})
    assert [item.nodeid for item in found] == ["b.py::one", "b.py::two", "c.py::one", "a.py::one", "a.py::two"]


def test_every_test_file_of_the_suite_has_a_time():
    known = json.loads(schedule.DURATIONS.read_text())
    files = {str(path.relative_to(ROOT)) for path in (ROOT / "tests").rglob("test_*.py")}
    missing = sorted(files - known.keys())
    assert len(missing) <= len(files) // 10, f"refresh tests/durations.json (pytest --store-durations): {missing}"


def collected_first(files: list[str], **env: str) -> str:
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *files],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**{k: v for k, v in os.environ.items() if k != "PYTEST_XDIST_WORKER"}, **env})
    assert done.returncode == 0, done.stdout + done.stderr
    return next(line for line in done.stdout.splitlines() if "::" in line).split("::")[0]


def test_a_worker_of_a_parallel_run_collects_the_longest_file_first_and_a_serial_run_keeps_the_order():
    files = ["tests/clusterpanel/test_api_contract.py", "tests/jobs/chat/test_idle_pages.py"]
    longer = max(files, key=schedule.known_durations().get)  # durations.json's to say, refreshed now and then
    for given in (files, files[::-1]):
        assert collected_first(given, PYTEST_XDIST_WORKER="gw0") == longer
        assert collected_first(given) == given[0]


def test_a_run_ends_with_its_slowest_files_and_those_over_the_budget(monkeypatch, capsys):
    spent = {"tests/a/test_slow.py": 200.0, "tests/a/test_quick.py": 1.5, "tests/b/test_mid.py": 20.0}
    monkeypatch.setattr(schedule, "_spent", defaultdict(float, spent))  # this run's own reports still land in it
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    lines: list[str] = []
    reporter = SimpleNamespace(write_line=lines.append, section=lambda title: lines.append(f"== {title}"))
    schedule.pytest_terminal_summary(reporter)
    assert lines[0] == "== the 15 slowest test files (seconds, set-up included)"
    assert [line.split()[-1] for line in lines[1:4]] == ["tests/a/test_slow.py", "tests/b/test_mid.py",
                                                         "tests/a/test_quick.py"]
    assert lines[4] == "files over 150 s: tests/a/test_slow.py (200 s)"
    assert lines[5] == "by directory: tests/a 202 s, tests/b 20 s"
