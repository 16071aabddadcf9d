"""The engine child's loop: take jobs as slots free up, run them together a decode step at a time, end them.

A job's Celery message starts the loop (`run`); the loop then claims the
deployment's waiting jobs itself, in the order jobs/queue/queueing.py decides, whenever
a sequence is free — told at once through Redis when a job comes
(jobs/task_messages.py), and looking in the database at least every second in case
that word was lost. Batch items hold at most slots − 1 sequences when there are
two or more, so a chat never waits for a batch item to end. It returns when
nothing waits and nothing runs; the messages of jobs it already ran then find
nothing to claim.
"""

import logging
import time

from django.db import close_old_connections
from django.utils import timezone

from jobs.engine import child
from jobs.engine.loaded_model import Engine, EngineError
from jobs.engine.sequences import Batcher, DecodeError, Outcome
from jobs.models import Job, JobStatus
from jobs.queue import queueing, sharing
from models_app.models import Deployment, GgufModel

log = logging.getLogger(__name__)
LOOK_EVERY_S = 1.0  # how often the database is asked for new jobs when no word of one came
CHECK_DEPLOYMENT_S = 2.0  # how often the loop makes sure its deployment is still the one it serves
REPORT_EVERY_S = 2.0  # the deployment page's slots and tokens/s, while generating


def run(job_id: int) -> None:
    """A job's message: serve this deployment's jobs until none waits or runs. The first need not be `job_id`,
    nor need that job still exist. Taking the next jobs without waiting for their messages means a message lost
    with Redis (a restart) strands nobody while the engine is busy."""
    close_old_connections()
    deployment = Deployment.objects.filter(pk=child.deployment_id()).first()
    if deployment is None or not child.current(deployment):
        return  # for the next engine of this deployment: it re-sends the message of every waiting job
    try:
        engine = child.engine_for(deployment)
    except EngineError:
        return  # the deployment failed saying why; its jobs are settled with it
    except Exception as exc:  # e.g. Redis, which carries answers, is down: the job this message is for fails
        job = queueing.claim_next(deployment.pk)
        if job is None:
            raise
        child.failed(job, exc)
        return
    Server(deployment, engine).serve()


class Server:
    def __init__(self, deployment: Deployment, engine: Engine) -> None:
        self.deployment, self.engine = deployment, engine
        self.batcher: Batcher = engine.batcher
        self.batcher.draft_most = deployment.draft_tokens
        engine.use_draft(draft_path(deployment))
        self.jobs: dict[int, Job] = {}  # running here: job id → job
        self.alone: Job | None = None  # claimed, waiting for the others to end so that it runs by itself
        self.looked_at = self.checked_at = self.reported_at = 0.0
        self.taking = True
        self.freed = True  # a sequence came free since the database was last asked
        self.news = False  # jobs started or ended since the page and the waiting jobs were last told
        self.rate = Rate()
        self.drafting = Drafting()

    def serve(self) -> None:
        child.State.out.deferring = True
        try:
            while True:
                self.take_jobs()
                if not self.batcher.busy:
                    if self.alone is None:
                        return
                    continue
                self.step()
        finally:
            child.State.out.deferring = False
            child.State.out.send_due()
            self.tell()
            if self.reported_at:  # jobs ran: the page hears that the slots are free (a message that found
                self.report(force=True)  # nothing to run, one per job already run, says nothing)

    # Taking jobs

    def take_jobs(self) -> None:
        now = time.monotonic()
        if self.alone is not None and not self.batcher.busy:
            job, self.alone = self.alone, None
            job.started = timezone.now()  # it waited, claimed, for the others to end: its time starts now
            Job.objects.filter(pk=job.pk).update(started=job.started)
            self.begin(job)
            return
        if not self.batcher.free or self.alone is not None or self.running_alone() or not self.still_current(now):
            return
        word = child.State.cancels.take_new_work()
        if not (word or now - self.looked_at >= LOOK_EVERY_S or not self.batcher.busy or self.freed):
            return
        self.looked_at, self.freed = now, False
        claimed, began = False, timezone.now()
        while self.batcher.free and self.alone is None:
            job = queueing.claim_next(self.deployment.pk, batch_allowed=self.batch_allowed()) or sharing.take(
                self.deployment)
            if job is None:
                break
            claimed = True
            if job.params.get("alone") and self.batcher.busy:
                self.alone = job  # Verify compares a lone run with the head: it waits for the others to end
                break
            self.begin(job)
            if self.running_alone():
                break
            # Every job waiting when it began, and then the step: claiming each new one of a burst as it came (each
            # some tens of ms in the web server) held the step back for the whole burst, 0.5-0.7 s at 16 clients.
            if job.created > began and self.batcher.busy:
                self.freed = True  # those that came meanwhile are claimed right after the step
                break
        self.news = self.news or claimed

    def running_alone(self) -> bool:
        return any(job.params.get("alone") for job in self.jobs.values())

    def batch_allowed(self) -> bool:
        slots = len(self.batcher.sequences)
        batch_items = sum(1 for job in self.jobs.values() if job.batch_id)
        return slots < 2 or batch_items < slots - 1

    def still_current(self, now: float) -> bool:
        if self.taking and now - self.checked_at >= CHECK_DEPLOYMENT_S:
            self.checked_at = now
            self.deployment.refresh_from_db()
            self.taking = child.current(self.deployment)
            self.batcher.draft_most = self.deployment.draft_tokens  # an admin's change, taken at once
            self.engine.use_draft(draft_path(self.deployment))
        return self.taking

    def begin(self, job: Job) -> None:
        try:
            if job.is_embedding:  # read whole between two steps: nothing to stream, no sequence kept
                child.embed(job, self.engine)
                self.freed = self.news = True
                child.State.out.forget(job.pk)
                return
            work = child.start(job, self.engine)
            self.batcher.add(work)
        except Exception as exc:  # a claimed job still ends, and says why
            child.failed(job, exc)
            child.State.out.forget(job.pk)
            self.freed = True
            return
        self.jobs[job.pk] = job
        self.news = True

    # Running them

    def step(self) -> None:
        try:
            self.step_and_end()
        except DecodeError as exc:
            self.fail_all(EngineError(f"llama.cpp could not compute the next tokens ({exc}); the jobs "
                                      "running beside this one ended too."))
        except Exception as exc:  # whatever else: the jobs in flight still end, and say why
            log.exception("a decode step failed")
            self.fail_all(exc)

    def step_and_end(self) -> None:
        ended = self.batcher.step()
        for key, outcome in ended:
            self.end(key, outcome)
        for seq in self.batcher.busy:
            key = seq.work.key
            if child.State.cancels(key):
                self.end(key, self.batcher.cancel(seq))
        child.State.out.send_due()
        self.rate.add(self.batcher.generated)
        self.tell()
        self.report()  # tokens/s every few seconds while generating; nothing right after tell()

    def end(self, key: int, outcome: Outcome) -> None:
        job = self.jobs.pop(key)
        status = JobStatus.CANCELLED if outcome.cancelled else JobStatus.SUCCEEDED
        child.finish(job, status, **child.outcome_fields(job, outcome))
        child.State.out.forget(job.pk)
        child.State.cancels.forget(job.pk)
        self.freed = self.news = True

    def fail_all(self, exc: Exception) -> None:
        """Every job in the step ends failed; the caches go (a failed step may have left them half written)."""
        for seq in list(self.batcher.busy):
            job = self.jobs.pop(seq.work.key, None)
            self.batcher.cancel(seq)
            if job is not None:
                child.failed(job, exc)
                child.State.out.forget(job.pk)  # its stream, kept for rewriting after a Redis failure, goes
        self.batcher.forget_all()
        self.freed = True

    # Telling the deployment page

    def tell(self) -> None:
        """After the step, once its tokens are sent: the slots to the deployment page and, when jobs were
        claimed, the new places of the waiting ones. Once for all jobs that started or ended together (each
        report is a database write and a broadcast), and not before a job's first step: it waits for no one."""
        if not self.news:
            return
        self.news = False
        self.report(force=True)
        queueing.announce_positions(self.deployment.pk)

    def report(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.reported_at < REPORT_EVERY_S:
            return
        self.reported_at = now
        child.set_engine(self.deployment, slots=len(self.batcher.sequences), busy=len(self.jobs),
                          jobs=sorted(self.jobs), tokens_per_s=round(self.rate.per_second(), 1),
                          draft={**self.drafting.since_last(self.batcher), "problem": self.engine.draft_problem or (
                              self.batcher.draft_model.broken if self.batcher.draft_model else "")},
                          at=time.time())


def draft_path(deployment: Deployment) -> str | None:
    """Where the deployment's draft model is on the head, while drafting is on; None: n-grams, or none."""
    if not deployment.draft_tokens or deployment.draft_model_id is None:
        return None
    return GgufModel.objects.filter(pk=deployment.draft_model_id).values_list("path", flat=True).first()


class Drafting:
    """Speculative decoding since the last report: the share of drafted tokens kept, and tokens made per step
    through the model (1 without drafting)."""

    def __init__(self) -> None:
        self.counts = (0, 0, 0, 0)

    def since_last(self, batcher: Batcher) -> dict:
        now = (batcher.drafted, batcher.accepted, batcher.trips, batcher.generated)
        drafted, kept, trips, made = (b - a for a, b in zip(self.counts, now, strict=True))
        self.counts = now
        found = {"tokens": batcher.draft_most}
        if drafted:
            found["kept"] = round(kept / drafted, 3)
        if trips:
            found["per_trip"] = round(made / trips, 2)
        return found


class Rate:
    """Tokens per second over the last few seconds, from a running count."""

    WINDOW_S = 3.0

    def __init__(self) -> None:
        self.points: list[tuple[float, int]] = []

    def add(self, count: int) -> None:
        now = time.monotonic()
        self.points.append((now, count))
        while len(self.points) > 2 and now - self.points[1][0] > self.WINDOW_S:
            self.points.pop(0)

    def per_second(self) -> float:
        if len(self.points) < 2:
            return 0.0
        (t0, c0), (t1, c1) = self.points[0], self.points[-1]
        return (c1 - c0) / (t1 - t0) if t1 > t0 else 0.0
