"""The CPU a simulated laptop has: one core of this machine, or a share of one (cgroup v1)."""

import os
from pathlib import Path


def hold_to(group: Path, cpus: float) -> None:
    """A cpu cgroup (v1) held to `cpus` of one core, which it gets whenever it asks, as a slow laptop of its own
    would, not behind every other process of this machine (the most shares cgroup v1 gives; the default is
    1024)."""
    (group / "cpu.cfs_period_us").write_text("100000")
    (group / "cpu.cfs_quota_us").write_text(str(int(cpus * 100000)))
    (group / "cpu.shares").write_text("262144")


def give_one_core(i: int, sshd_pid: int) -> None:
    """Laptop `i`, and all its sshd starts, on one of this machine's cores, the laptops in turn: the laptops
    share this machine, and one that believed it had all its cores would run a thread per core (its rpc-server
    asks `nproc`), each spinning at every step for others that wait behind the other laptops' threads. Measured
    on 2 cores, 3 laptops, 60 tokens: 49 tokens/s unpinned and 6 beside two busy processes; pinned, 66 and 57
    (docs/benchmarks.md, "Met: simulated laptops of one core")."""
    cores = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(sshd_pid, {cores[(i - 1) % len(cores)]})
