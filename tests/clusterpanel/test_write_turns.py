"""A write run `promptly` takes SQLite's lock once another process lets it go, fails as before when it is held past
the database's timeout, and leaves the connection's own wait as it was."""

import sqlite3
import threading
import time

import pytest
from django.contrib.contenttypes.models import ContentType
from django.db import OperationalError, connection, transaction
from django.db.models import F

from clusterpanel.kit import write_turns


def busy_timeout() -> int:
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA busy_timeout")
        return cursor.fetchone()[0]


def touch() -> int:
    return ContentType.objects.filter(pk=ContentType.objects.order_by("pk").first().pk).update(model=F("model"))


def held_elsewhere(seconds: float) -> tuple[threading.Thread, threading.Event]:
    """Another connection (another process, to SQLite) holding the write lock for `seconds`; the event is set
    just before it lets go."""
    taken, letting_go = threading.Event(), threading.Event()

    def hold() -> None:
        other = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        taken.set()
        time.sleep(seconds)
        letting_go.set()
        other.execute("COMMIT")
        other.close()

    thread = threading.Thread(target=hold)
    thread.start()
    assert taken.wait(10)
    return thread, letting_go


def test_a_write_waits_for_the_lock_and_then_runs(transactional_db):
    thread, letting_go = held_elsewhere(0.5)
    try:
        assert write_turns.promptly(touch) == 1
        assert letting_go.is_set(), "it waited for the other writer"
    finally:
        thread.join()
    assert busy_timeout() == 20_000, "the connection's own wait is back"


def test_a_transaction_whose_begin_found_the_lock_taken_begins_again(transactional_db):
    committed, begun = [], []

    def queue_like() -> int:  # as jobs/queue/queueing.py `submit`: BEGIN IMMEDIATE takes the lock
        begun.append(1)
        with transaction.atomic():
            transaction.on_commit(lambda: committed.append(1))
            return touch()

    thread, _ = held_elsewhere(0.3)
    try:
        assert write_turns.promptly(queue_like) == 1
    finally:
        thread.join()
    assert len(begun) > 1, "its first BEGIN found the lock taken"
    assert committed == [1], "one commit, its hooks run once"
    assert not connection.in_atomic_block and connection.get_autocommit()


def test_a_lock_held_past_the_timeout_fails_as_before(transactional_db, monkeypatch):
    monkeypatch.setattr(write_turns, "timeout_s", lambda: 0.3)
    thread, _ = held_elsewhere(1.5)
    try:
        with pytest.raises(OperationalError, match="locked"):
            write_turns.promptly(touch)
        assert busy_timeout() == 300
    finally:
        thread.join()
        write_turns.busy_wait(20_000)  # this worker's connection serves the tests after this one


def test_other_errors_are_not_tried_again(transactional_db):
    calls = []

    def broken() -> None:
        calls.append(1)
        with connection.cursor() as cursor:
            cursor.execute("UPDATE no_such_table SET x = 1")

    with pytest.raises(OperationalError, match="no such table"):
        write_turns.promptly(broken)
    assert calls == [1]
    assert busy_timeout() == 20_000
