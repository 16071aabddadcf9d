"""One engine worker per ready deployment, started and stopped by the supervisor (`manage.py supervise`).

An engine worker is a Celery worker with one child, taking jobs only from its
deployment's queue. It runs in its own process group: when it has to go (the
deployment stopped, was re-planned, or the worker died), the whole group goes,
so no orphaned child keeps running a job that a new engine would run again.
"""

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings

from jobs.engine.child import ENV_DEPLOYMENT, ENV_REVISION
from jobs.queue import ending, failover, queueing
from models_app.models import Deployment, DeploymentStatus

log = logging.getLogger(__name__)
ROOT = Path(__file__).resolve().parents[2]
STOP_WITHIN_S = 10
# settings.ENGINE_STALLED_S (30 s): jobs waiting this long with nothing running and no message get one
# (jobs/queue/queueing.py)
MAX_BACKOFF_S = 60
# ggml aborts the engine when a laptop's rpc-server dies mid-answer, and first has gdb print its backtrace: 5.7 s
# on a busy 2-core head, with every job waiting for the abort to be told and retried. Its own message ("Remote
# RPC server crashed ...") still reaches the engine's log.
NO_BACKTRACE = {"GGML_NO_BACKTRACE": "1"}


class Engines:
    def __init__(self) -> None:
        self.running: dict[int, tuple[int, subprocess.Popen]] = {}  # deployment → (revision, worker)
        self.started: dict[int, float] = {}
        self.failures: dict[int, tuple[int, float]] = {}  # deployment → (deaths in a row, next start)
        self.woken: dict[int, float] = {}  # deployment → when its queue was last checked for lost messages

    def tick(self) -> None:
        wanted = dict(Deployment.objects.filter(status=DeploymentStatus.READY).values_list("pk", "revision"))
        for pk, (revision, worker) in list(self.running.items()):
            try:
                self.check(pk, revision, worker, wanted.get(pk))
            except Exception:  # one engine's trouble must not keep the others unchecked
                log.exception("engine for deployment %s: checking it failed", pk)
        for pk, revision in wanted.items():
            if pk not in self.running and time.monotonic() >= self.failures.get(pk, (0, 0.0))[1]:
                self.start_or_back_off(pk, revision)

    def check(self, pk: int, revision: int, worker: subprocess.Popen, wanted_revision: int | None) -> None:
        if worker.poll() is not None:
            self.died(pk, worker.returncode)
            self.stop(pk)
        elif wanted_revision != revision:
            self.stop(pk)
        elif time.monotonic() - self.woken.get(pk, 0.0) > settings.ENGINE_STALLED_S:
            self.woken[pk] = time.monotonic()
            if queueing.wake_if_stalled(Deployment.objects.get(pk=pk), settings.ENGINE_STALLED_S):
                log.warning("deployment %s: jobs waited %d s with no message to wake its engine; sent one",
                            pk, settings.ENGINE_STALLED_S)

    def start_or_back_off(self, pk: int, revision: int) -> None:
        """An engine that cannot start is logged and tried again later; the other deployments' still start."""
        try:
            self.start(pk, revision)
        except Exception:
            if pk in self.running:  # it runs; only writing that down failed
                log.exception("engine for deployment %s started, but recording it failed", pk)
                return
            wait = self.back_off(pk)
            log.exception("engine for deployment %s could not start; trying again in %d s", pk, wait)

    def start(self, pk: int, revision: int) -> None:
        logs = Path(settings.DATA_DIR) / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "celery", "-A", "clusterpanel", "worker", "--queues", f"engine.{pk}",
                "--concurrency", "1", "--pool", "prefork", "--hostname", f"engine-{pk}-r{revision}@%h",
                "--without-gossip", "--without-mingle", "--loglevel", "INFO"]
        env = {**os.environ, ENV_DEPLOYMENT: str(pk), ENV_REVISION: str(revision), **NO_BACKTRACE}
        with open(logs / f"engine-{pk}.log", "ab") as out:
            worker = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                      start_new_session=True)
        self.running[pk] = (revision, worker)
        self.started[pk] = time.monotonic()
        Deployment.objects.filter(pk=pk).update(engine={"state": "starting", "worker": worker.pid})
        log.info("engine for deployment %s (revision %s) started: pid %s", pk, revision, worker.pid)

    def died(self, pk: int, code: int) -> None:
        wait = self.back_off(pk)
        log.warning("engine for deployment %s exited with %s; starting it again in %d s", pk, code, wait)

    def back_off(self, pk: int) -> int:
        """Seconds until the next start: doubling with each failure in a row, up to a minute."""
        lived = time.monotonic() - self.started.get(pk, 0.0)
        deaths = 1 if lived > MAX_BACKOFF_S else self.failures.get(pk, (0, 0.0))[0] + 1
        wait = min(2 ** deaths, MAX_BACKOFF_S)
        self.failures[pk] = (deaths, time.monotonic() + wait)
        return wait

    def stop(self, pk: int) -> None:
        revision, worker = self.running.pop(pk)
        end_group(worker)
        log.info("engine for deployment %s (revision %s) stopped", pk, revision)
        deployment = Deployment.objects.filter(pk=pk).first()
        if deployment is not None and deployment.status != DeploymentStatus.READY:  # not a reload: it is going
            failover.move_waiting(deployment, f"its deployment is {deployment.get_status_display().lower()}")
        ending.settle_abandoned(pk)  # its engine is gone: jobs left on a stopped or failed deployment end now

    def close(self) -> None:
        for pk in list(self.running):
            try:
                self.stop(pk)
            except Exception:  # still stop the others: each runs in a session of its own and would outlive us
                log.exception("engine for deployment %s: stopping it failed", pk)


def end_group(worker: subprocess.Popen) -> None:
    """TERM the worker's group (a Celery warm shutdown lets a running job finish), KILL what is left."""
    try:
        os.killpg(worker.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        worker.wait(STOP_WITHIN_S)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(worker.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    worker.wait()
