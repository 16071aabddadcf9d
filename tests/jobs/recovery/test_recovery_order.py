"""The supervisor stops a deployment's engine the moment it sees the deployment degraded, and the engine is
what starts the recovery: the degraded status may only become visible once the recovery task is sent."""

import threading

from jobs import task_messages
from jobs.engine import recovery
from models_app.models import Deployment, DeploymentStatus


def status_seen_elsewhere(pk: int) -> str:
    """What another process (the supervisor) reads now: a thread has its own database connection."""
    seen = {}

    def read() -> None:
        from django.db import connection

        seen["status"] = Deployment.objects.get(pk=pk).status
        connection.close()

    reader = threading.Thread(target=read)
    reader.start()
    reader.join(30)
    return seen["status"]


def test_a_deployment_turns_degraded_only_once_its_recovery_is_on_its_way(ready, transactional_db, monkeypatch):
    sent = []
    monkeypatch.setattr(task_messages, "recover_deployment",
                        lambda *args: sent.append((args, status_seen_elsewhere(ready.pk))))

    recovery.laptops_died(ready, {"test-2": "its rpc-server ended: killed (signal 9)"}, [])

    assert sent == [((ready.pk, ["test-2"], []), DeploymentStatus.READY)], "sent while others still saw it ready"
    assert status_seen_elsewhere(ready.pk) == DeploymentStatus.DEGRADED
    ready.refresh_from_db()
    assert "test-2" in ready.status_detail
