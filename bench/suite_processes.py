"""Where the machine's CPU goes while something runs (the suite, say), by kind of process.

Samples /proc every second: each process's CPU time since the last look, added to its kind (from its command
line). A process that starts and ends between two looks is not seen; the report says how much of the machine's
busy time (/proc/stat) the kinds it saw account for.

    python3 bench/suite_processes.py --out /tmp/kinds.json -- make test
    python3 bench/suite_processes.py --report /tmp/kinds.json
"""

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter

TICK = os.sysconf("SC_CLK_TCK")
KINDS = [  # first match wins: (kind, words any of which is in the command line)
    ("browser (Chromium, Playwright)", ("chromium", "playwright", "/node ")),
    ("rpc-servers (laptops)", ("ggml-rpc-server",)),
    ("qemu (ARM laptop)", ("qemu-",)),
    ("sshd and laptop shells", ("sshd", "sh -c", "bash -c", "/bin/sh")),
    ("kernel threads", ("[kworker", "[ksoftirqd", "[rcu", "[migration", "[kthreadd")),
    ("redis", ("redis-server",)),
    ("one-shot model runs (deploy checks, speed tests)", ("models_app.llamacpp.oneshot",)),
    ("celery workers and engines", ("celery",)),
    ("supervisors", ("supervise",)),
    ("metrics collectors", ("manage.py metrics",)),
    ("web servers", ("webserver", "daphne", "runpanel", "runserver")),
    ("pytest workers", ("pytest", "execnet", "xdist", "exec(eval(sys.stdin.readline()))")),
    ("builds", ("cc1", "cmake", "make", "ld", "glslc", "ninja")),
]


def kind_of(cmdline: str) -> str:
    for kind, words in KINDS:
        if any(word in cmdline for word in words):
            return kind
    return "other: " + (cmdline.split(" ")[0].rsplit("/", 1)[-1][:30] or "?")


def cpu_of(pid: str) -> tuple[str, float, str] | None:
    """The process's identity (its id and start time: ids are reused), CPU seconds so far, command line."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            name, fields = stat.read().split("(", 1)[1].rsplit(")", 1)
        with open(f"/proc/{pid}/cmdline", "rb") as raw:
            cmdline = raw.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return None
    fields = fields.split()  # from the state on: utime is the 12th, stime the 13th, starttime the 20th
    return f"{pid}@{fields[19]}", (int(fields[11]) + int(fields[12])) / TICK, cmdline or f"[{name}]"


def machine_busy() -> float:
    with open("/proc/stat") as stat:
        values = [int(v) for v in stat.readline().split()[1:]]
    return (sum(values) - values[3] - values[4]) / TICK  # all but idle and iowait


def watch(command: list[str], out: str) -> int:
    seen: dict[str, tuple[float, str]] = {}  # pid → (cpu seen so far, kind)
    by_kind: Counter = Counter()
    for pid in filter(str.isdigit, os.listdir("/proc")):  # what ran before us counts from now on
        now = cpu_of(pid)
        if now:
            seen[now[0]] = (now[1], kind_of(now[2]))
    began, busy_before = time.monotonic(), machine_busy()
    child = subprocess.Popen(command)
    while child.poll() is None:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            now = cpu_of(pid)
            if now is None:
                continue
            identity, cpu, cmdline = now
            before, kind = seen.get(identity, (0.0, kind_of(cmdline)))  # new: all it used is ours
            by_kind[kind] += cpu - before
            seen[identity] = (cpu, kind)
        time.sleep(1)
    report = {"wall_s": time.monotonic() - began, "busy_s": machine_busy() - busy_before,
              "kinds": dict(by_kind.most_common()), "rc": child.returncode}
    with open(out, "w") as file:
        json.dump(report, file, indent=1)
    print_report(report)
    return child.returncode


def print_report(report: dict) -> None:
    busy = report["busy_s"]
    wall = report["wall_s"]
    print(f"\n{wall:.0f} s of wall time, {busy:.0f} core-seconds busy ({busy / wall:.2f} cores)")
    print(f"{'core-s':>8} {'share':>6}  kind")
    for kind, cpu in report["kinds"].items():
        if cpu >= 1:
            print(f"{cpu:8.0f} {cpu / busy:6.1%}  {kind}")
    unseen = busy - sum(report["kinds"].values())
    print(f"{unseen:8.0f} {unseen / busy:6.1%}  not seen (processes shorter than a second, the kernel)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="/tmp/suite-processes.json")
    parser.add_argument("--report", help="print the report of an earlier run")
    parser.add_argument("command", nargs="*")
    args = parser.parse_args()
    if args.report:
        with open(args.report) as file:
            print_report(json.load(file))
        return 0
    if not args.command:
        parser.error("give a command to run, after --")
    return watch(args.command, args.out)


if __name__ == "__main__":
    sys.exit(main())
