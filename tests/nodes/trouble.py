"""Real trouble for tests to cause: a laptop whose SSH hangs, a laptop asleep, a database locked by another
process."""

import contextlib
import os
import signal
import sqlite3
import subprocess
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings

from nodes.simlan.lan import Laptop


def children_by_parent() -> dict[int, list[tuple[int, str]]]:
    found = defaultdict(list)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # gone meanwhile
            continue
        command, rest = text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 2:].split()
        found[int(rest[1])].append((int(stat.parent.name), command))
    return found


def sshd_processes(laptop: Laptop) -> list[int]:
    """The laptop's listening sshd and the sshd processes under it that serve open connections (stopping only
    the listener would leave connections made before working: a hung laptop answers none)."""
    children, found, todo = children_by_parent(), [], [laptop.sshd_pid]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += [child for child, command in children[pid] if command.startswith("sshd")]
    return found


@contextlib.contextmanager
def frozen_sshd(laptop: Laptop) -> Iterator[list[int]]:
    """SIGSTOP the laptop's sshd processes; SIGCONT them whatever happens, so tear-down can reach the laptop."""
    stopped = []
    try:
        os.kill(laptop.sshd_pid, signal.SIGSTOP)  # first: it accepts no new connection while we look
        stopped.append(laptop.sshd_pid)
        for pid in sshd_processes(laptop)[1:]:
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:  # that connection closed since the scan: nothing left to freeze
                continue
            stopped.append(pid)
        yield stopped
    finally:
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


@contextlib.contextmanager
def locked_database() -> Iterator[None]:
    """Another process's write transaction on the test database, held open: every other writer waits out its
    timeout (20 s, settings.py) and then fails with "database is locked", as under a long write elsewhere."""
    db = sqlite3.connect(settings.DATABASES["default"]["NAME"], timeout=30, isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        yield
    finally:
        db.execute("ROLLBACK")
        db.close()


@contextlib.contextmanager
def asleep(laptop: Laptop) -> Iterator[list[int]]:
    """Every process of the laptop stopped, as when its lid closes: its rpc-server, its sshd and the
    connections already open answer nothing and refuse nothing. All are continued whatever happens."""
    stopped: list[int] = []
    try:
        os.kill(laptop.sshd_pid, signal.SIGSTOP)  # first: no new connection starts a process while we look
        stopped.append(laptop.sshd_pid)
        for _ in range(2):  # again, for what a connection started while the first round froze its shell
            listed = subprocess.run(["ip", "netns", "pids", laptop.netns], capture_output=True, text=True,
                                    check=True).stdout.split()
            for pid in (int(p) for p in listed if int(p) not in stopped):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGSTOP)
                    stopped.append(pid)
        yield stopped
    finally:
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
