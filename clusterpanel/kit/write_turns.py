"""A write that takes SQLite's lock as soon as it is free, not after SQLite's own sleeps.

SQLite waits for a locked database (its busy timeout) by sleeping between tries: 1, 2, 5, 10 ms at first, then 25,
50 and 100 ms. A waiter asleep misses the moments the lock is free, and writers that keep coming take it instead:
under a burst of 16 requests the engine's claim of a job waited 645 ms (bench/concurrency.py --timeline), and with
three busy writers a single UPDATE waited 630 ms median against 13 ms when it tried again every 2 ms
(bench/sqlite_turns.py). `promptly` runs such a write with SQLite's wait off and tries again itself, every 2 ms,
up to the same 20 s. Only where someone waits on it: a request's queueing, the engine's claim, its report and a
job's end (jobs/queue/queueing.py, jobs/engine/child.py).

A write given to it does nothing but write: no `transaction.on_commit` hook inside (Django runs hooks within the
block's exit, so a hook's own "locked" would run the write again; register it after `promptly` returns).

On PostgreSQL (docker-compose), or inside a transaction that already holds the lock, the write runs as it is.
"""

import time
from collections.abc import Callable
from typing import TypeVar

from django.conf import settings
from django.db import OperationalError, connection

RETRY_EVERY_S = 0.002
T = TypeVar("T")


def promptly(write: Callable[[], T]) -> T:
    """`write()`, its turn at the lock taken as soon as the lock is free; OperationalError after the database's
    timeout, as without."""
    if connection.vendor != "sqlite" or connection.in_atomic_block:
        return write()
    timeout = timeout_s()
    deadline = time.monotonic() + timeout
    busy_wait(0)
    try:
        while True:
            try:
                return write()
            except OperationalError as exc:
                # the lock is taken at the write's first statement (BEGIN IMMEDIATE, or an UPDATE alone), before
                # it changed anything: trying again repeats nothing
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
            time.sleep(RETRY_EVERY_S)
    finally:
        if connection.connection is not None:
            busy_wait(int(timeout * 1000))


def timeout_s() -> float:
    return float(settings.DATABASES["default"].get("OPTIONS", {}).get("timeout", 5))


def busy_wait(ms: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"PRAGMA busy_timeout = {ms:d}")
