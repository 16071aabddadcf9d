"""A ready deployment of the bundled model over simulated laptops, with its engine, for job tests."""

import os
import signal

from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator

from clusterpanel.asgi import application
from jobs import queueing
from jobs.models import Job, JobKind
from models_app import deploy
from models_app.library import ensure_bundled
from models_app.models import Deployment, DeploymentStatus
from tests.conftest import wait_until
from tests.nodes.test_live_updates import headers_for

GREEDY = {"temperature": 0.0, "top_p": 1.0, "top_k": 40, "repeat_penalty": 1.0, "stop": []}


def deploy_bundled(laptops, ctx: int = 1024) -> Deployment:
    deployment = deploy.create(ensure_bundled(), laptops, ctx, mode="even")
    deploy.prepare(deployment)
    deployment.refresh_from_db()
    assert deployment.status == DeploymentStatus.READY, deployment.status_detail
    return deployment


def engine_ready(deployment: Deployment, within: float = 120) -> None:
    wait_until(lambda: Deployment.objects.get(pk=deployment.pk).engine.get("state") in ("ready", "failed"), within,
               "the engine to load the model")
    deployment.refresh_from_db()
    assert deployment.engine["state"] == "ready", deployment.engine


def chat(deployment: Deployment, user, text: str, **params) -> Job:
    return queueing.submit(Job(kind=JobKind.CHAT, deployment=deployment, user=user,
                               messages=[{"role": "user", "content": text}], params={**GREEDY, **params}))


def listen(job: Job, user, until_done: float = 120.0, on_event=None) -> list[dict]:
    """Every event a browser's socket gets for the job, until it is done."""
    headers = headers_for(user)

    async def scenario():
        comm = WebsocketCommunicator(application, f"/ws/jobs/{job.pk}/", headers=headers)
        connected, _ = await comm.connect()
        assert connected
        events = []
        while not events or events[-1].get("event") != "done":
            events.append(await comm.receive_json_from(timeout=until_done))
            if on_event:
                await on_event(comm, events)
        await comm.disconnect()
        return events

    return async_to_sync(scenario)()


def end_engines() -> None:
    """Leave no engine worker behind if the supervisor could not stop them itself."""
    for engine in Deployment.objects.values_list("engine", flat=True):
        pid = (engine or {}).get("worker")
        if pid and os.path.exists(f"/proc/{pid}") and b"celery" in open(f"/proc/{pid}/cmdline", "rb").read():
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
