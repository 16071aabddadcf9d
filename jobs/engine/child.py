"""The engine worker's child: one deployment's model kept loaded between jobs, and each job run on it.

The child knows its deployment and revision from the environment its engine
worker was started with (jobs/engine/workers.py). What it settles when it starts is in
jobs/engine/leftovers.py.
"""

import logging
import os
import time
import traceback
from datetime import UTC, datetime

import redis
from django.conf import settings
from django.db import InterfaceError, OperationalError, close_old_connections, transaction
from django.utils import timezone

from clusterpanel.kit.broadcast import broadcast
from clusterpanel.kit.write_turns import promptly
from jobs.engine.embedding import EmbeddingError, encoded
from jobs.engine.loaded_model import Engine, EngineError, kept
from jobs.engine.sequences import Outcome, Work
from jobs.engine.toolcalls import ToolCalls
from jobs.models import Job, JobStatus
from jobs.queue import ending, queueing, stream
from models_app.llamacpp.chat import ChatError
from models_app.models import Deployment, DeploymentStatus

log = logging.getLogger(__name__)
ENV_DEPLOYMENT, ENV_REVISION = "CLUSTERPANEL_ENGINE_DEPLOYMENT", "CLUSTERPANEL_ENGINE_REVISION"
FINISH_TRIES = 6  # about a minute of retries before a job's end is given up on (the engine's log says so)
RELOAD_EXIT = 75
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
        # listening before any job runs
        State.cancels = State.cancels or stream.CancelWatch(State.out.redis, stream.new_work_channel(deployment.queue))
        State.engine = load(deployment)
    return State.engine


def load(deployment: Deployment) -> Engine:
    from models_app.deploying.deploy import endpoints, expected_devices

    plan, last = deployment.plan, [0.0]

    def report(progress: float) -> None:
        if progress >= 1.0 or time.monotonic() - last[0] > 0.3:
            last[0] = time.monotonic()
            set_engine(deployment, state="loading", progress=round(progress, 3))

    servers = server_pids(deployment)
    set_engine(deployment, state="loading", progress=0.0, pid=os.getpid(), servers=servers)
    engine = Engine(deployment.model.path, endpoints(deployment), plan["n_gpu_layers"], plan["tensor_split"],
                    deployment.ctx, expected_devices(plan), deployment.slots)
    try:
        engine.load(report)
    except EngineError as exc:
        set_engine(deployment, state="failed", detail=str(exc))
        deployment.set_status(DeploymentStatus.FAILED, f"The engine could not load the model: {exc}")
        State.retired = True
        raise
    if server_pids(deployment) != servers:
        reload_afresh(deployment)
    # Over laptops a save costs thousands of round trips (values are read a row at a time without flash
    # attention, jobs/engine/promptstore.py): the store serves engines whose layers are all on the head.
    engine.batcher.store.capacity = 0 if engine.endpoints else settings.ENGINE_PROMPT_CACHE_MIB * 2**20
    set_engine(deployment, state="ready", progress=1.0, slots=engine.slots, busy=0, jobs=[], tokens_per_s=0.0,
               draft={"tokens": deployment.draft_tokens}, any_shape=engine.batcher.any_shape,
               at=time.time())  # a previous engine's report is not ours
    return engine


def reload_afresh(deployment: Deployment) -> None:
    """A laptop's rpc-server was restarted while the model loaded: whether the engine reached the old process or
    the new one is not known, and recovery tells a laptop that failed from one that did not by the pid the engine
    loaded onto (jobs/engine/recovery.py). This child ends, as it would had ggml aborted on the old server; its
    successor loads onto the servers running then (jobs/engine/leftovers.py)."""
    log.warning("deployment %s: a laptop's rpc-server was restarted while the model loaded; loading it again",
                deployment.pk)
    set_engine(deployment, state="restarting")
    logging.shutdown()
    os._exit(RELOAD_EXIT)


def server_pids(deployment: Deployment) -> dict[str, int]:
    return {stage.node.name: stage.server.pid for stage in deployment.stages.select_related("node", "server")
            if stage.server}


def set_engine(deployment: Deployment, **fields) -> None:
    deployment.engine = {**deployment.engine, **fields}
    promptly(lambda: Deployment.objects.filter(pk=deployment.pk).update(engine=deployment.engine))
    broadcast(f"deployment_{deployment.pk}", "deployment.engine", deployment.engine)


def start(job: Job, engine: Engine) -> Work:
    """Tell listeners the claimed job runs; its work for the batcher (EngineError if it cannot run)."""
    work = prepared(job, engine)
    # Verify compares token for token with the head alone, which reads one token a step: no drafts beside it.
    work.draft = not job.params.get("alone")
    if job.params.get("logprobs") is not None:
        work.logprobs = job.params["logprobs"]
        work.on_logprob = lambda found: State.out.event(job.pk, "logprob", found)
    return work


def prepared(job: Job, engine: Engine) -> Work:
    if job.batch_id:
        broadcast(f"batch_{job.batch_id}", "batch.progress", {"job": job.pk, "status": JobStatus.RUNNING})
    out = State.out
    out.start(job.pk, job.attempts)
    out.event(job.pk, "status", {"status": JobStatus.RUNNING})
    if ending.cancel_asked(job.pk):  # asked before our watch was listening
        State.cancels.asked.add(job.pk)
    params = job.params
    # The same request gives the same answer (docs/api.md) when it has a seed or is greedy, so such jobs reuse
    # only a prefix read as their own prompt would be (jobs/engine/pieces.py); a conversation on the chat page,
    # or a sampled request, reuses any cached prefix.
    reuse = bool(job.conversation_id) or (params.get("seed") is None and params["temperature"] > 0)
    if uses_tools(job):
        try:
            rendered = engine.tool_prompt(job.messages, params)
        except ChatError as exc:
            raise EngineError(f"llama.cpp's chat layer could not render these messages and tools: {exc}") from None
        on_text = lambda text: out.token(job.pk, text)  # noqa: E731
        if rendered.syntax is not None:
            job.tool_reader = ToolCalls(job.pk, rendered.syntax, on_text,
                                        lambda delta: out.event(job.pk, "tool_call", delta))
            on_text = job.tool_reader.add
        return engine.work(job.pk, rendered.tokens, params, on_text, rendered.stops, reuse, rendered)
    prompt, stops, dropped = job_prompt(engine, job, out)
    job.dropped_messages = dropped
    # Where its prompt's pieces end matters only where a step's shape changes a token's numbers (sequences.py).
    cuts = () if job.is_completion or engine.batcher.any_shape else engine.turn_cuts(kept(job.messages, dropped),
                                                                                      prompt)
    return engine.work(job.pk, prompt, params, lambda text: out.token(job.pk, text), stops, reuse, cuts=cuts)


def embed(job: Job, engine: Engine) -> None:
    """An embedding job, run and ended at once: it streams nothing, so its vectors are written with its end."""
    out = State.out
    out.start(job.pk, job.attempts)
    out.event(job.pk, "status", {"status": JobStatus.RUNNING})
    tokens = engine.embedding_tokens(job.inputs)
    began = time.monotonic()
    try:
        vectors = engine.embed(tokens)
    except EmbeddingError as exc:
        raise EngineError(str(exc)) from None
    finish(job, JobStatus.SUCCEEDED, embeddings=[encoded(vector) for vector in vectors], finish_reason="stop",
           prompt_tokens=sum(map(len, tokens)), completion_tokens=0, prompt_seconds=time.monotonic() - began)


def uses_tools(job: Job) -> bool:
    """Tools offered, or calls and their results in the history: rendered by llama.cpp's chat layer, which knows
    how the model's template shows them (llama-cpp-python's formatter does not)."""
    return not job.is_completion and (bool(job.params.get("tools")) or any(
        message.get("role") == "tool" or message.get("tool_calls") for message in job.messages))


def job_prompt(engine: Engine, job: Job, out: stream.JobStream) -> tuple[list[int], list[str], int]:
    if job.is_completion:
        return engine.llm.tokenize(job.prompt.encode(), add_bos=True, special=False), [], 0
    if job.conversation_id:
        # A conversation on the chat page goes on however long it gets: what no longer fits is left out (and
        # the page says so). A script's messages are taken as sent: too long is its error to see.
        prompt, stops, dropped = engine.fitting_chat_prompt(job.messages, answer_room(job, engine.ctx))
        if dropped:
            out.event(job.pk, "context", {"dropped": dropped, "kept": len(job.messages) - dropped,
                                          "ctx": engine.ctx})
        return prompt, stops, dropped
    prompt, stops = engine.chat_prompt(job.messages)
    return prompt, stops, 0


def outcome_fields(job: Job, outcome: Outcome) -> dict:
    reader = getattr(job, "tool_reader", None)
    if reader is not None:  # a tool-using answer: its content and its calls, read in the model's format
        content, calls = reader.end()
        reason = "tool_calls" if calls and outcome.finish_reason == "stop" else outcome.finish_reason
        return {**answer_fields(job, outcome), "output": content, "tool_calls": calls, "finish_reason": reason}
    return answer_fields(job, outcome)


def answer_fields(job: Job, outcome: Outcome) -> dict:
    return {"output": outcome.text, "finish_reason": outcome.finish_reason, "logprobs": outcome.logprobs,
            "prompt_tokens": outcome.prompt_tokens, "completion_tokens": outcome.completion_tokens,
            "prompt_seconds": outcome.prompt_seconds, "dropped_messages": job.dropped_messages,
            "cached_tokens": outcome.reused_tokens, "drafted_tokens": outcome.drafted,
            "accepted_tokens": outcome.accepted,
            "first_token": (datetime.fromtimestamp(outcome.first_token_at, tz=UTC)
                            if outcome.first_token_at else None)}


def failed(job: Job, exc: Exception) -> None:
    """A claimed job that could not run ends, saying why."""
    if isinstance(exc, EngineError):  # ContextExceeded too: their messages are written for people
        finish(job, JobStatus.FAILED, error=str(exc))
        return
    log.error("job %s failed", job.pk, exc_info=exc)
    finish(job, JobStatus.FAILED, error=unexpected(exc))


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


def answer_room(job: Job, ctx: int) -> int:
    """Tokens a conversation's prompt leaves for the answer: what was asked for, at most half the context."""
    return min(job.params.get("max_tokens", 256), ctx // 2)


def finish(job: Job, status: str, **fields) -> None:
    """Store the outcome once: only the attempt that holds the job may write it."""
    finished = timezone.now()
    written = write_outcome(job, status=status, finished=finished, **fields,
                            **job.seconds_to(finished, fields.get("first_token", job.first_token)))
    if not written:
        return
    job.refresh_from_db()
    tell_done(job)
    try:
        stream.store().delete(ending.cancel_key(job.pk))
    except redis.RedisError as exc:  # the key expires by itself
        log.warning("could not forget job %s's cancel request: %s", job.pk, exc)
    if job.batch_id:
        broadcast(f"batch_{job.batch_id}", "batch.progress", {"job": job.pk, "status": status})


def write_outcome(job: Job, tries: int = FINISH_TRIES, **fields) -> int:
    """The guarded update that ends a job, tried again while the database refuses it (SQLite locked past its
    timeout, PostgreSQL restarting): given up, the job would stay RUNNING under an engine that goes on to the
    next. Guarded, so a try that did land is never written twice."""
    tokens = tokens_of(job, fields)  # before the transaction: a Redis read must not hold the database's lock

    def store() -> int:
        with transaction.atomic():  # counted in /metrics exactly when it ends
            holding = Job.objects.filter(pk=job.pk, status=JobStatus.RUNNING, attempts=job.attempts)
            written = holding.update(**fields)
            if written:
                ending.tally(job, tokens, fields, (fields.get("prompt_tokens"), fields.get("completion_tokens")))
            return written

    for attempt in range(1, tries + 1):
        try:
            return promptly(store)  # every sequence's next token waits for it
        except (OperationalError, InterfaceError) as exc:
            if attempt == tries:
                raise
            log.warning("job %s: could not store its end (%s); trying again", job.pk, exc)
            close_old_connections()
            time.sleep(min(2 ** attempt, 30))
    return 0


def tokens_of(job: Job, fields: dict) -> int | None:
    """What the job generated: its count when it finished, else (failed mid-answer) the tokens its stream holds,
    which /metrics counted while it ran and must not take back."""
    if fields.get("completion_tokens") is not None:
        return fields["completion_tokens"]
    return ending.tokens_streamed(job)


def tell_done(job: Job) -> None:
    """The job's last event. Through the channel layer when the job's stream could not confirm it (Redis
    failed it a moment ago): no listener is left waiting for an end that already came."""
    if State.out:
        State.out.event(job.pk, "done", job.summary())
        if State.out.flush():
            return
    stream.announce_done(job)
