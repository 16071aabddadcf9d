"""The engine worker's child: one deployment's model kept loaded between jobs, and each job run on it.

The child knows its deployment and revision from the environment its engine
worker was started with (jobs/engines.py). What it settles when it starts is in
jobs/engine_child.py.
"""

import logging
import os
import time
import traceback
from datetime import UTC, datetime

import redis
from django.db import InterfaceError, OperationalError, close_old_connections
from django.utils import timezone

from clusterpanel.broadcast import broadcast
from jobs import queueing, stream
from jobs.engine import Engine, EngineError
from jobs.models import Job, JobKind, JobStatus
from models_app.models import Deployment, DeploymentStatus

log = logging.getLogger(__name__)
ENV_DEPLOYMENT, ENV_REVISION = "CLUSTERPANEL_ENGINE_DEPLOYMENT", "CLUSTERPANEL_ENGINE_REVISION"
FINISH_TRIES = 6  # about a minute of retries before a job's end is given up on (the engine's log says so)
MAX_ENGINE_STOPS = 2  # an engine that died twice under the same job (no laptop to blame) gives up on it


class State:
    engine: Engine | None = None
    retired = False  # this child's deployment changed under it: it takes no more jobs
    out: stream.JobStream | None = None
    cancels: stream.CancelWatch | None = None


def deployment_id() -> int | None:
    value = os.environ.get(ENV_DEPLOYMENT)
    return int(value) if value else None


def current(deployment: Deployment) -> bool:
    return (not State.retired and deployment.pk == deployment_id()
            and deployment.revision == int(os.environ.get(ENV_REVISION, "0"))
            and deployment.status in queueing.USABLE)


def warm_up(deployment_pk: int) -> None:
    close_old_connections()
    deployment = Deployment.objects.get(pk=deployment_pk)
    if current(deployment):
        engine_for(deployment)


def engine_for(deployment: Deployment) -> Engine:
    if State.engine is None:
        State.out = State.out or stream.JobStream()
        State.cancels = State.cancels or stream.CancelWatch(State.out.redis)  # listening before any job runs
        State.engine = load(deployment)
    return State.engine


def load(deployment: Deployment) -> Engine:
    from models_app.deploy import endpoints, expected_devices

    plan, last = deployment.plan, [0.0]
    servers = {s.node.name: s.server.pid for s in deployment.stages.select_related("node", "server") if s.server}

    def report(progress: float) -> None:
        if progress >= 1.0 or time.monotonic() - last[0] > 0.3:
            last[0] = time.monotonic()
            set_engine(deployment, state="loading", progress=round(progress, 3))

    set_engine(deployment, state="loading", progress=0.0, pid=os.getpid(), servers=servers)
    engine = Engine(deployment.model.path, endpoints(deployment), plan["n_gpu_layers"], plan["tensor_split"],
                    deployment.ctx, expected_devices(plan))
    try:
        engine.load(report)
    except EngineError as exc:
        set_engine(deployment, state="failed", detail=str(exc))
        deployment.set_status(DeploymentStatus.FAILED, f"The engine could not load the model: {exc}")
        State.retired = True
        raise
    set_engine(deployment, state="ready", progress=1.0)
    return engine


def set_engine(deployment: Deployment, **fields) -> None:
    deployment.engine = {**deployment.engine, **fields}
    Deployment.objects.filter(pk=deployment.pk).update(engine=deployment.engine)
    broadcast(f"deployment_{deployment.pk}", "deployment.engine", deployment.engine)


def run(job_id: int) -> None:
    """A job's message: run this deployment's waiting jobs, whichever comes first each time (jobs/queueing.py),
    until none waits. The first need not be `job_id`, nor need that job still exist. Going on to the next job
    without waiting for its message means a message lost with Redis (a restart) strands nobody while the engine
    is busy; the later messages then find nothing to claim."""
    close_old_connections()
    while True:
        deployment = Deployment.objects.filter(pk=deployment_id()).first()
        if deployment is None or not current(deployment):
            return  # for the next engine of this deployment: it re-sends the message of every waiting job
        job = queueing.claim_next(deployment.pk)
        if job is None:
            return
        run_one(job)


def run_one(job: Job) -> None:
    try:
        result = begin(job)
    except EngineError as exc:  # ContextExceeded too: their messages are written for people
        finish(job, JobStatus.FAILED, error=str(exc))
        return
    except Exception as exc:  # whatever else: a claimed job still ends, and says why
        log.exception("job %s failed", job.pk)
        finish(job, JobStatus.FAILED, error=unexpected(exc))
        return
    status = JobStatus.CANCELLED if result.cancelled else JobStatus.SUCCEEDED
    finish(job, status, output=result.text, finish_reason=result.finish_reason,
           prompt_tokens=result.prompt_tokens, completion_tokens=result.completion_tokens,
           prompt_seconds=result.prompt_seconds, dropped_messages=result.dropped_messages,
           first_token=datetime.fromtimestamp(result.first_token_at, tz=UTC) if result.first_token_at else None)


def begin(job: Job):
    """Tell listeners the claimed job runs, then run it on the engine (loaded first if need be)."""
    queueing.announce_positions(job.deployment_id)
    if job.batch_id:
        broadcast(f"batch_{job.batch_id}", "batch.progress", {"job": job.pk, "status": JobStatus.RUNNING})
    State.out = State.out or stream.JobStream()
    State.cancels = State.cancels or stream.CancelWatch(State.out.redis)
    out = State.out
    out.start(job.pk)
    out.event(job.pk, "status", {"status": JobStatus.RUNNING})
    return generate(engine_for(job.deployment), job, out)


def unexpected(exc: Exception) -> str:
    """A plain reason for a failure no code path expected; the engine worker's log has the traceback."""
    if isinstance(exc, redis.RedisError):
        return (f"The panel's Redis, which carries answers to you, did not answer ({exc}). "
                "Send it again once Redis is back.")
    if from_chat_template(exc):  # e.g. templates that insist user and assistant take turns
        return f"The model's chat template refused these messages: {exc}"
    if isinstance(exc, UnicodeError):
        return f"The text is not valid Unicode, so the model cannot read it ({exc})."
    return f"The job failed unexpectedly ({type(exc).__name__}: {exc}); the engine worker's log has the details."


def from_chat_template(exc: Exception) -> bool:
    """Raised while the model's own Jinja chat template ran (its `raise_exception`, or a Jinja error)."""
    import jinja2  # llama-cpp-python's dependency, needed only where templates run

    return isinstance(exc, jinja2.TemplateError) or any(
        frame.f_code.co_filename == "<template>" for frame, _ in traceback.walk_tb(exc.__traceback__))


def generate(engine: Engine, job: Job, out: stream.JobStream):
    asked_before = bool(out.redis.exists(queueing.cancel_key(job.pk)))  # before our watch was listening
    dropped = 0
    if job.kind == JobKind.COMPLETION:
        prompt, stops = engine.llm.tokenize(job.prompt.encode(), add_bos=True, special=False), []
    elif job.conversation_id:
        # A conversation on the chat page goes on however long it gets: what no longer fits is left out (and
        # the page says so). A script's messages are taken as sent: too long is its error to see.
        prompt, stops, dropped = engine.fitting_chat_prompt(job.messages, answer_room(job, engine.ctx))
        if dropped:
            out.event(job.pk, "context", {"dropped": dropped, "kept": len(job.messages) - dropped,
                                          "ctx": engine.ctx})
    else:
        prompt, stops = engine.chat_prompt(job.messages)
    result = engine.run(prompt, job.params, lambda text: out.token(job.pk, text),
                        lambda: asked_before or State.cancels(job.pk), stops)
    result.dropped_messages = dropped
    return result


def answer_room(job: Job, ctx: int) -> int:
    """Tokens a conversation's prompt leaves for the answer: what was asked for, at most half the context."""
    return min(job.params.get("max_tokens", 256), ctx // 2)


def finish(job: Job, status: str, **fields) -> None:
    """Store the outcome once: only the attempt that holds the job may write it."""
    written = write_outcome(job, status=status, finished=timezone.now(), **fields)
    if not written:
        return
    job.refresh_from_db()
    tell_done(job)
    try:
        stream.store().delete(queueing.cancel_key(job.pk))
    except redis.RedisError as exc:  # the key expires by itself
        log.warning("could not forget job %s's cancel request: %s", job.pk, exc)
    if job.batch_id:
        broadcast(f"batch_{job.batch_id}", "batch.progress", {"job": job.pk, "status": status})


def write_outcome(job: Job, tries: int = FINISH_TRIES, **fields) -> int:
    """The guarded update that ends a job, tried again while the database refuses it (SQLite locked past its
    timeout, PostgreSQL restarting): given up, the job would stay RUNNING under an engine that goes on to the
    next. Guarded, so a try that did land is never written twice."""
    for attempt in range(1, tries + 1):
        try:
            return Job.objects.filter(pk=job.pk, status=JobStatus.RUNNING, attempts=job.attempts).update(**fields)
        except (OperationalError, InterfaceError) as exc:
            if attempt == tries:
                raise
            log.warning("job %s: could not store its end (%s); trying again", job.pk, exc)
            close_old_connections()
            time.sleep(min(2 ** attempt, 30))
    return 0


def tell_done(job: Job) -> None:
    """The job's last event. Through the channel layer when the job's stream could not confirm it (Redis
    failed it a moment ago): no listener is left waiting for an end that already came."""
    if State.out:
        State.out.event(job.pk, "done", job.summary())
        if State.out.flush():
            return
    stream.announce_done(job)
