"""Make sure every process the panel started ends with it (Linux)."""

import ctypes
import os
import signal
import time
from pathlib import Path

from clusterpanel.kit import procs

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> None:
    """Orphaned descendants are re-parented to this process instead of init."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def children() -> list[int]:
    me, found = os.getpid(), []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            if procs.parent_of(int(proc.name)) == me:
                found.append(int(proc.name))
    return found


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(os.getpgid(pid), sig) if os.getpgid(pid) == pid else os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _reap() -> None:
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def end_children(grace: float = 10.0, rounds: int = 5) -> int:
    """Terminate, then kill, every child still running, and the orphans each death hands to us.

    Returns how many there were. Children that lead their own process group
    (make run starts each program so, clusterpanel/run/keeper.py) are signalled as a group.
    """
    ended = 0
    for _ in range(rounds):
        _reap()
        pids = children()
        if not pids:
            break
        ended += len(pids)
        for pid in pids:
            _signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while any(pid in children() for pid in pids) and time.monotonic() < deadline:
            _reap()
            time.sleep(0.1)
        for pid in pids:
            if pid in children():
                _signal_group(pid, signal.SIGKILL)
        time.sleep(0.2)  # let the orphans of those deaths reach us
    _reap()
    return ended
