"""Recovery always ends: whatever goes wrong while it brings a deployment back, the deployment ends ready or failed
with the reason, and each job a laptop's death failed gets its retry or is told why not (an API client waits for
that answer, up to 600 s). Redis away when a retry is queued, and the database refusing writes past its timeout
while re-planning, are the two that escaped it."""

import threading
import time

import pytest

from jobs.engine import recovery
from jobs.models import Job, JobKind, JobStatus
from models_app.models import Deployment, DeploymentStatus
from nodes.models import Node, RpcServer, ServerStatus
from tests.nodes.trouble import locked_database
from tests.services import redis_down

HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
LOCKED_S = 26  # past SQLite's 20 s timeout (settings.py): a write under the lock fails with "database is locked"


@pytest.fixture
def failed(ready, bob) -> Job:
    return Job.objects.create(kind=JobKind.COMPLETION, deployment=ready, user=bob, prompt="hi",
                              params={"max_tokens": 4}, status=JobStatus.FAILED,
                              error="Stopped: lab-2 stopped answering during generation (killed).")


def on_two_laptops(deployment: Deployment) -> None:
    """Its layers on lab-1 and lab-2, each with an rpc-server the supervisor reported running."""
    for position, name in enumerate(("lab-1", "lab-2")):
        node = Node.objects.create(name=name, host=f"10.0.0.{position + 2}", username="lab", host_key=HOST_KEY,
                                   usable_memory=1 << 30)
        server = RpcServer.objects.create(node=node, status=ServerStatus.RUNNING, local_port=40000 + position)
        deployment.stages.create(position=position, node=node, first_layer=position, layer_count=1, memory={},
                                 server=server)
    deployment.set_status(DeploymentStatus.DEGRADED, "lab-2 failed. Re-planning on the laptops that are left.")


def test_it_writes_down_no_retry_when_redis_cannot_take_the_retry(transactional_db, failed, settings):
    settings.JOB_RETRIES = 1  # and outside a transaction, as in its worker: the message is sent at submit
    with redis_down():
        recovery.retry([failed.pk])
    failed.refresh_from_db()
    assert "Not retried. Its retry could not be queued" in failed.error and "Redis" in failed.error, failed.error
    waiting, _ = recovery.retry_state(failed.pk)
    assert not waiting, "an API client would wait for a retry that never comes"


def test_it_fails_the_deployment_saying_why_when_re_planning_breaks(transactional_db, ready, failed):
    on_two_laptops(ready)
    holder = threading.Thread(target=hold_the_lock)
    holder.start()
    time.sleep(0.5)  # the lock is held before recovery writes its new plan
    try:
        recovery.recover(ready, ["lab-2"], [failed.pk])
    finally:
        holder.join()
    ready.refresh_from_db()
    assert ready.status == DeploymentStatus.FAILED, ready.status
    assert "Recovery failed unexpectedly: database is locked" in ready.status_detail
    assert not RpcServer.objects.filter(wanted=True).exists(), "its laptops' servers are let go"
    failed.refresh_from_db()
    assert "Not retried. Recovery failed unexpectedly" in failed.error, failed.error
    assert recovery.retry_state(failed.pk) == (False, None)


def hold_the_lock() -> None:
    with locked_database():
        time.sleep(LOCKED_S)
