"""A node action's end is stored even when the database refuses writes for longer than its lock timeout: the
worker tries again rather than leave the action RUNNING forever."""

import threading
import time

from nodes.actions import steps as actions
from nodes.models import ActionKind, ActionStatus, Node, NodeAction
from nodes.tasks import run_action
from tests.nodes.trouble import locked_database

HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
LOCKED_S = 26  # past SQLite's 20 s timeout (settings.py): the first write of the end fails with "database is locked"


def test_it_stores_the_end_once_the_database_takes_writes_again(transactional_db, monkeypatch):
    released = threading.Event()

    def hold_the_lock() -> None:
        with locked_database():
            time.sleep(LOCKED_S)
        released.set()

    holder = threading.Thread(target=hold_the_lock)

    def done_as_the_lock_is_taken(action, node):
        holder.start()
        time.sleep(0.5)  # the lock is held before the action's end is written

    monkeypatch.setitem(actions.HANDLERS, ActionKind.PROBE, done_as_the_lock_is_taken)
    node = Node.objects.create(name="lab-1", host="10.0.0.2", username="lab", host_key=HOST_KEY)
    action = NodeAction.objects.create(node=node, kind=ActionKind.PROBE)
    try:
        run_action(action.pk)
    finally:
        holder.join()
    assert released.is_set()
    action.refresh_from_db()
    assert action.status == ActionStatus.SUCCEEDED and action.finished
