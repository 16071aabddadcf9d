"""A ready deployment of the bundled model over simulated laptops, with its engine, for job tests."""

import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.conf import settings

from clusterpanel.asgi import application
from jobs.models import Job, JobKind
from jobs.queue import queueing
from models_app.deploying import deploy
from models_app.library.adding import ensure_bundled
from models_app.models import Deployment, DeploymentStatus
from nodes.simlan.cpu import hold_to
from tests.conftest import wait_until
from tests.nodes.test_live_updates import headers_for

GREEDY = {"temperature": 0.0, "top_p": 1.0, "top_k": 40, "repeat_penalty": 1.0, "stop": []}


def deploy_bundled(laptops, ctx: int = 1024, slots: int = 1) -> Deployment:
    deployment = deploy.create(ensure_bundled(), laptops, ctx, mode="even", slots=slots)
    deploy.prepare(deployment)
    deployment.refresh_from_db()
    assert deployment.status == DeploymentStatus.READY, deployment.status_detail
    return deployment


def engine_ready(deployment: Deployment, within: float = 120) -> None:
    try:
        wait_until(lambda: Deployment.objects.get(pk=deployment.pk).engine.get("state") in ("ready", "failed"),
                   within, "the engine to load the model")
    except AssertionError as exc:  # what it was doing, in its own words: CI keeps no data folder
        deployment.refresh_from_db()
        said = engine_log(deployment)
        raise AssertionError(f"{exc}; its state {deployment.engine}; its log ended:\n{said}") from None
    deployment.refresh_from_db()
    assert deployment.engine["state"] == "ready", deployment.engine


def engine_log(deployment: Deployment, lines: int = 40) -> str:
    log = Path(settings.DATA_DIR) / "logs" / f"engine-{deployment.pk}.log"
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) if log.exists() else "(no log)"


def chat(deployment: Deployment, user, text: str, **params) -> Job:
    return queueing.submit(Job(kind=JobKind.CHAT, deployment=deployment, user=user,
                               messages=[{"role": "user", "content": text}], params={**GREEDY, **params}))


def listen(job: Job, user, until_done: float = 120.0, on_event=None) -> list[dict]:
    """Every event a browser's socket gets for the job, until it is done."""
    headers = headers_for(user)

    async def scenario():
        comm = WebsocketCommunicator(application, f"/ws/jobs/{job.pk}/", headers=headers)
        connected, _ = await comm.connect(timeout=30)
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


CPU_CGROUPS = Path("/sys/fs/cgroup/cpu")


def cpu_cgroup_of(pid: int) -> Path:
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            return CPU_CGROUPS / path.lstrip("/")
    return CPU_CGROUPS


@contextmanager
def slowed(deployment: Deployment, cpus: float) -> Iterator[None]:
    """The deployment's rpc-servers held to `cpus` of one core each (a cgroup cpu quota): slow laptops, so that
    an answer takes minutes. Each goes back to its own cgroup afterwards."""
    moved: list[tuple[int, Path, Path]] = []
    try:
        for stage in deployment.stages.select_related("server"):
            pid = stage.server.pid
            group = CPU_CGROUPS / f"clusterpanel-test-slow-{pid}"
            group.mkdir(exist_ok=True)
            # One thread (a simulated laptop has one core: nodes/simcpu.give_one_core) and the most shares: it
            # gets its quota beside any other load, so an answer lasts as long beside other tests as alone.
            hold_to(group, cpus)
            moved.append((pid, cpu_cgroup_of(pid), group))
            (group / "cgroup.procs").write_text(str(pid))
        yield
    finally:
        for pid, home, group in moved:
            if os.path.exists(f"/proc/{pid}"):
                (home / "cgroup.procs").write_text(str(pid))
            remove_cgroup(group)


def remove_cgroup(group: Path, within: float = 10.0) -> None:
    """A cgroup that stays busy while a process killed in it is still being reaped."""
    deadline = time.monotonic() + within
    while True:
        try:
            group.rmdir()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
