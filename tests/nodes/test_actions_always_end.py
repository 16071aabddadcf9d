"""A node action always ends, with the reason: whatever goes wrong after its claim, or when the worker running it
dies (it is settled when an ordinary Celery worker starts again, and an action whose message was lost is sent
again then). An engine worker starting settles nothing, nor does an ordinary worker settle the actions of another
that still answers: those may still be running."""

import socket
import subprocess
import threading
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.db import OperationalError
from django.utils import timezone

from clusterpanel.kit import procs
from jobs.engine.child import ENV_DEPLOYMENT, ENV_REVISION
from nodes.actions import steps as actions
from nodes.models import ActionKind, ActionStatus, Node, NodeAction
from nodes.tasks import INTERRUPTED, enqueue, run_action
from tests.celery_workers import start_worker
from tests.conftest import child_env, stop, wait_until

HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def laptop(name: str, port: int) -> Node:
    return Node.objects.create(name=name, host="127.0.0.1", port=port, username="lab", host_key=HOST_KEY)


@pytest.fixture
def hung_port() -> Iterator[int]:
    """A laptop whose SSH hangs: connections are taken and never answered (no SSH banner)."""
    server = socket.create_server(("127.0.0.1", 0))
    held, closing = [], threading.Event()

    def accept():
        while not closing.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1]
    closing.set()
    server.close()
    for connection in held:
        connection.close()


def status(action: NodeAction) -> str:
    action.refresh_from_db()
    return action.status


def test_it_fails_an_action_whose_failure_cannot_be_recorded_with_the_reason(db, monkeypatch):
    unreachable = laptop("lab-1", closed_port())

    def locked(*args, **kwargs):
        raise OperationalError("database is locked")

    monkeypatch.setattr(Node, "set_status", locked)  # recording the laptop offline fails after the claim
    action = NodeAction.objects.create(node=unreachable, kind=ActionKind.PROBE)
    run_action(action.pk)
    assert status(action) == ActionStatus.FAILED
    assert "database is locked" in action.error and action.finished


def test_it_fails_an_action_whose_handler_crashes_with_the_reason(db, monkeypatch):
    def crash(action, node):
        action.report("Half way there.")
        raise RuntimeError("the laptop's answer made no sense")

    monkeypatch.setitem(actions.HANDLERS, ActionKind.PROBE, crash)
    action = NodeAction.objects.create(node=laptop("lab-1", closed_port()), kind=ActionKind.PROBE)
    assert run_action(action.pk) == ActionStatus.FAILED
    assert status(action) == ActionStatus.FAILED and "the laptop's answer made no sense" in action.error


def test_a_worker_that_starts_settles_what_a_dead_worker_left(transactional_db, hung_port, tmp_path):
    hung = laptop("lab-1", hung_port)
    worker = start_worker(tmp_path / "first.log", "--hostname", "first@tests")
    try:
        running = enqueue(hung, ActionKind.PROBE)  # on_commit runs at once: no transaction is open
        wait_until(lambda: status(running) == ActionStatus.RUNNING, 30, "the probe to start")
        assert running.claimed_by == "first@tests"
        worker.kill()  # as the OOM killer or a power cut would: nothing in it runs again
        worker.wait()
    finally:
        stop(worker)
    lost = NodeAction.objects.create(node=laptop("lab-2", closed_port()), kind=ActionKind.PROBE)
    NodeAction.objects.filter(pk=lost.pk).update(created=timezone.now() - timedelta(minutes=1))  # message lost
    assert status(running) == ActionStatus.RUNNING and status(lost) == ActionStatus.QUEUED

    worker = start_worker(tmp_path / "second.log", "--hostname", "second@tests")  # the dead one answers no ping
    try:
        assert status(running) == ActionStatus.FAILED and running.error == INTERRUPTED
        wait_until(lambda: status(lost) == ActionStatus.FAILED, 30, "the lost action to run")
        assert "refused" in lost.error.lower() or "connect" in lost.error.lower(), lost.error
    finally:
        stop(worker)


def test_an_engine_worker_that_starts_settles_no_action(transactional_db, hung_port, tmp_path):
    action = NodeAction.objects.create(node=laptop("lab-1", hung_port), kind=ActionKind.PROBE)
    NodeAction.objects.filter(pk=action.pk).update(status=ActionStatus.RUNNING, started=timezone.now(),
                                                  created=timezone.now() - timedelta(minutes=1))
    engine = start_worker(tmp_path / "engine.log", "--queues", "engine.999",
                          env={**child_env(), ENV_DEPLOYMENT: "999", ENV_REVISION: "1"})
    try:
        assert status(action) == ActionStatus.RUNNING, "the ordinary worker may still be running it"
    finally:
        stop(engine)


def test_a_worker_that_starts_leaves_alone_what_another_live_worker_runs(transactional_db, hung_port, tmp_path):
    first = start_worker(tmp_path / "first.log", "--hostname", "first@tests")
    second = None
    try:
        action = NodeAction.objects.create(node=laptop("lab-1", hung_port), kind=ActionKind.PROBE)
        # As the first worker's claim leaves it (a real probe would end within its 10 s connect timeout, too
        # soon for a second worker's start on a busy machine).
        NodeAction.objects.filter(pk=action.pk).update(status=ActionStatus.RUNNING, started=timezone.now(),
                                                      claimed_by="first@tests")
        second = start_worker(tmp_path / "second.log", "--hostname", "second@tests")
        assert status(action) == ActionStatus.RUNNING, "the first worker answers: it may still be running it"
    finally:
        stop(first)
        if second is not None:
            stop(second)
    action.finish(ActionStatus.SUCCEEDED)
    assert status(action) == ActionStatus.SUCCEEDED, "its own worker ends it"
    assert not action.finish(ActionStatus.FAILED, INTERRUPTED) and status(action) == ActionStatus.SUCCEEDED, \
        "an end, once written, stays"


def test_a_worker_that_starts_leaves_alone_what_a_process_outside_any_worker_runs(transactional_db, tmp_path):
    """The demo probes its laptops in its own process while `make run` starts the worker: under load the worker's
    start came second and failed the probe it found running, and the demo with it."""
    called_here = NodeAction.objects.create(node=laptop("lab-1", closed_port()), kind=ActionKind.PROBE)
    run_action(called_here.pk)
    called_here.refresh_from_db()
    assert called_here.claimed_by == procs.this_process() != ""

    gone = subprocess.Popen(["true"])
    gone.wait()
    here, ended = (NodeAction.objects.create(node=laptop(f"lab-{i}", closed_port()), kind=ActionKind.PROBE)
                   for i in (2, 3))
    for action, claim in ((here, procs.this_process()), (ended, f"{procs.this_machine()}:{gone.pid}:0")):
        NodeAction.objects.filter(pk=action.pk).update(status=ActionStatus.RUNNING, started=timezone.now(),
                                                      claimed_by=claim)
    worker = start_worker(tmp_path / "worker.log", "--hostname", "worker@tests")
    try:
        assert status(here) == ActionStatus.RUNNING, "this process still runs it"
        assert status(ended) == ActionStatus.FAILED and ended.error == INTERRUPTED
    finally:
        stop(worker)
