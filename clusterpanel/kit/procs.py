"""Processes on this machine as /proc tells them, and the name a process claims work under.

A claim ("<machine>:<pid>:<start time>") is written on a record a process works on (a deployment it prepares, an
action it runs outside any worker), so that another process can tell whether the claimer still runs: a pid
alone is reused, its start time (clock ticks after boot) is not.
"""

import os
import re
import socket
from pathlib import Path

CLAIM = re.compile(r"(?P<machine>[^:@\s]+/\d+):(?P<pid>\d+):(?P<start>\d+)")


def stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat from its third field on (the state): the command name before it may hold spaces and
    parentheses. None when there is no such process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):  # gone before, or between open and read
        return None


def is_running(pid: int) -> bool:
    """Alive and not a zombie waiting for its parent to reap it."""
    fields = stat_fields(pid)
    return fields is not None and fields[0] != "Z"


def parent_of(pid: int) -> int | None:
    fields = stat_fields(pid)
    return int(fields[1]) if fields is not None and fields[0] != "Z" else None


def started_at(pid: int) -> str | None:
    """When the process started (field 22), None when it is gone or a zombie."""
    fields = stat_fields(pid)
    return fields[19] if fields is not None and fields[0] != "Z" else None


def this_machine() -> str:
    """The host name and the pid namespace: containers sharing one host name (docker compose's services on
    web's network) each see their own pids."""
    return f"{socket.gethostname()}/{os.stat('/proc/self/ns/pid').st_ino}"


def this_process() -> str:
    return f"{this_machine()}:{os.getpid()}:{started_at(os.getpid())}"


def is_claim(text: str) -> bool:
    """Whether `text` is a claim made by this_process() (a Celery worker's name is not)."""
    return CLAIM.fullmatch(text) is not None


def on_this_machine(claim: str) -> bool:
    return claim.startswith(f"{this_machine()}:")


def ended(claim: str) -> str:
    """Why the claimer (on this machine) no longer runs, in words; "" while it runs."""
    found = CLAIM.fullmatch(claim)
    if found is None:
        return f"{claim!r} names no process"
    pid, now = found["pid"], started_at(int(found["pid"]))
    if now is None:
        return f"process {pid} on {socket.gethostname()} has ended"
    return "" if now == found["start"] else f"process {pid} on {socket.gethostname()} has ended; a new one took its pid"


def still_running(claim: str) -> bool:
    """Whether the claimer still runs; one on another machine cannot be told from here and counts as running
    (it ends its work itself)."""
    return not on_this_machine(claim) or not ended(claim)
