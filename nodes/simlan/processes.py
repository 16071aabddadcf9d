"""Processes of the simulated LAN: found by owner, ended by id, told apart from zombies."""

import os
import signal
import time
from pathlib import Path

from clusterpanel.kit.procs import is_running


def pids_of_uid(uid: int) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if proc.stat().st_uid == uid:
                    pids.append(int(proc.name))
            except FileNotFoundError:
                pass
    return pids


def kill_pids(pids: list[int]) -> None:
    """These processes live in this LAN's namespaces or run as its users: ours to end."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = []
        for pid in pids:
            try:
                os.kill(pid, sig)
                alive.append(pid)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 2
        while alive and time.monotonic() < deadline:
            alive = [p for p in alive if is_running(p)]
            time.sleep(0.05)
        pids = alive
        if not pids:
            return
