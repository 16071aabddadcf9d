"""Where the suite's time goes: per test, its wall time and how busy the whole machine was meanwhile.

A pytest plugin and its report. For each test (set-up, call and tear-down together) it writes one JSON line:
wall seconds, machine-wide busy core-seconds from /proc/stat (every process: the test's web servers, workers,
browsers and simulated laptops included) and whether it failed. A file whose busy core-seconds are far below
twice its wall time mostly waits, and could overlap other work on two cores; one near it could not.

    TEST_WORKERS=0 PYTHONPATH=bench PYTEST_ADDOPTS="-p suite_cpu" SUITE_CPU_OUT=/tmp/suite.jsonl make test
    python3 bench/suite_cpu.py /tmp/suite.jsonl [--files 30]

The busy figures are meaningful only in a serial run on an otherwise idle machine: they are the machine's, not
the test's. In a parallel run (`make test`), `--beside S` shows what the other workers ran beside each file
that took over S seconds: two files that both mostly wait, side by side, leave the cores idle.
"""

import argparse
import json
import os
import time
from collections import Counter

try:
    import pytest

    wraps_each_test = pytest.hookimpl(hookwrapper=True)
except ImportError:  # the report alone, under a Python without pytest
    def wraps_each_test(function):
        return function


OUT = os.environ.get("SUITE_CPU_OUT", "/tmp/suite-cpu.jsonl")
TICKS = os.sysconf("SC_CLK_TCK")
_failed: set[str] = set()


def busy_seconds() -> float:
    """Core-seconds this machine has spent on anything but idling and waiting for disks, since boot."""
    with open("/proc/stat") as stat:
        fields = [int(value) for value in stat.readline().split()[1:9]]
    return (sum(fields) - fields[3] - fields[4]) / TICKS


def pytest_runtest_logreport(report) -> None:
    if report.failed:
        _failed.add(report.nodeid)


@wraps_each_test
def pytest_runtest_protocol(item, nextitem):
    started, busy = time.monotonic(), busy_seconds()
    yield
    record = {"id": item.nodeid, "wall": time.monotonic() - started, "busy": busy_seconds() - busy,
              "failed": item.nodeid in _failed, "end": time.time(),
              "worker": os.environ.get("PYTEST_XDIST_WORKER", "")}
    with open(OUT, "a") as out:
        out.write(json.dumps(record) + "\n")


def report(path: str, files: int, cores: int) -> None:
    rows = [json.loads(line) for line in open(path)]
    wall, busy, by_dir_wall, by_dir_busy = Counter(), Counter(), Counter(), Counter()
    for row in rows:
        name = row["id"].split("::", 1)[0]
        wall[name] += row["wall"]
        busy[name] += row["busy"]
        by_dir_wall[name.rsplit("/", 1)[0]] += row["wall"]
        by_dir_busy[name.rsplit("/", 1)[0]] += row["busy"]
    total_wall, total_busy = sum(wall.values()), sum(busy.values())
    print(f"{len(rows)} tests: {total_wall / 60:.1f} min, {total_busy / 60:.1f} busy core-min: the machine "
          f"{total_busy / total_wall / cores:.0%} busy; all of it packed onto {cores} cores: "
          f"{total_busy / cores / 60:.1f} min\n")
    print("| directory | wall | busy core-min | machine busy |\n|---|--:|--:|--:|")
    for name, seconds in by_dir_wall.most_common():
        print(f"| {name} | {seconds / 60:.1f} min | {by_dir_busy[name] / 60:.1f} | "
              f"{by_dir_busy[name] / seconds / cores:.0%} |")
    print(f"\nThe {files} files that leave the most idle: cores × wall − busy\n")
    print("| file | wall | busy core-s | machine busy |\n|---|--:|--:|--:|")
    for name in sorted(wall, key=lambda n: busy[n] - cores * wall[n])[:files]:
        print(f"| {name} | {wall[name]:.0f} s | {busy[name]:.0f} | {busy[name] / wall[name] / cores:.0%} |")


def beside(path: str, longer_than: float) -> None:
    """In a parallel run: what the other workers ran while each long file ran (its files and their time)."""
    rows = [json.loads(line) for line in open(path)]
    spans: dict[tuple[str, str], list[float]] = {}
    for row in rows:
        key = (row.get("worker", ""), row["id"].split("::", 1)[0])
        start, end = row["end"] - row["wall"], row["end"]
        span = spans.setdefault(key, [start, end])
        span[0], span[1] = min(span[0], start), max(span[1], end)
    print("| file (worker) | wall | beside it: file, seconds overlapping |\n|---|--:|---|")
    for (worker, name), (start, end) in sorted(spans.items(), key=lambda kv: kv[1][0]):
        if end - start < longer_than:
            continue
        others = [(other, min(end, e) - max(start, s)) for (w, other), (s, e) in spans.items()
                  if w != worker and min(end, e) > max(start, s)]
        said = ", ".join(f"{other.removeprefix('tests/')} {seconds:.0f}" for other, seconds
                         in sorted(others, key=lambda each: -each[1])[:6])
        print(f"| {name} ({worker}) | {end - start:.0f} s | {said} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path")
    parser.add_argument("--files", type=int, default=30)
    parser.add_argument("--cores", type=int, default=os.cpu_count())
    parser.add_argument("--beside", type=float, metavar="S",
                        help="a parallel run instead: what ran beside each file longer than S seconds")
    args = parser.parse_args()
    if args.beside is not None:
        beside(args.path, args.beside)
    else:
        report(args.path, args.files, args.cores)
