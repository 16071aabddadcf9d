"""Putting jobs in front of a deployment's engine, cancelling them, and telling where they stand.

Queue messages are only wake-up calls, one per job: each lets the engine claim,
in the database, the job that comes first (`claim_next`), so a message delivered
twice runs nothing twice, and an engine that starts re-sends the messages of
every job still queued. Which job comes first is `ORDER`: whatever people wait
for (chat, the APIs) before batch items, oldest first within each; a running
job is never interrupted, so a chat waits at most for the batch item under way.
"""

from datetime import timedelta

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone
from redis.exceptions import RedisError

from clusterpanel.broadcast import broadcast
from jobs import messages, stream
from jobs.models import Job, JobStatus
from models_app.models import Deployment, DeploymentStatus

USABLE = (DeploymentStatus.READY, DeploymentStatus.DEGRADED)
GONE = (DeploymentStatus.STOPPED, DeploymentStatus.FAILED)  # no engine runs their jobs, now or later
# How long a running job's engine has to confirm a stop before the job ends without it. The engine looks between
# tokens: reading a long prompt on slow laptops can take tens of seconds before the first.
STOP_CONFIRM_S = 60
ORDER = (F("batch_id").asc(nulls_first=True), "created", "pk")  # batches run in the order they came, too


class QueueError(Exception):
    pass


class QueueDown(Exception):
    """The job could not be handed to its engine (Redis, the broker, is unreachable): it is failed, not left
    waiting for a message that was never sent."""


def cancel_key(job_id: int) -> str:
    return f"job:{job_id}:cancel"


def check_deployment(deployment: Deployment) -> None:
    if deployment.status not in USABLE:
        raise QueueError(f"Deployment #{deployment.pk} is {deployment.get_status_display().lower()}, "
                         "not ready: choose a ready deployment.")


def submit(job: Job) -> Job:
    """Save a new job and wake its deployment's engine once the row is committed."""
    check_deployment(job.deployment)
    job.save()
    transaction.on_commit(lambda: hand_over(job))
    return job


def submit_many(jobs: list[Job]) -> list[Job]:
    """Save new jobs for one deployment in one statement (a batch file's lines); wake the engine per job on commit."""
    if not jobs:
        return jobs
    check_deployment(jobs[0].deployment)
    saved = Job.objects.bulk_create(jobs)
    transaction.on_commit(lambda: hand_over_all(saved))
    return saved


def wake(job: Job) -> None:
    messages.run_job(job.pk, job.deployment.queue)


def hand_over_all(jobs: list[Job]) -> None:
    """Each job its message; when one cannot be sent, it and every job after it fail, then QueueDown."""
    from kombu.exceptions import OperationalError

    for sent, job in enumerate(jobs):
        try:
            wake(job)
        except (OperationalError, OSError) as exc:
            fail_unqueued([job.pk for job in jobs[sent:]], exc)
            raise QueueDown(f"{len(jobs) - sent} of {len(jobs)} jobs could not be queued: {exc}") from None


def hand_over(job: Job) -> None:
    """Wake the engine for a new job; if that cannot be done, the job fails now rather than wait forever."""
    hand_over_all([job])


def fail_unqueued(job_ids: list[int], exc: Exception) -> None:
    Job.objects.filter(pk__in=job_ids, status=JobStatus.QUEUED).update(
        status=JobStatus.FAILED, finished=timezone.now(),
        error=f"Could not queue this job: Redis, which carries jobs, is unreachable ({exc}).")


def wake_all(deployment: Deployment) -> int:
    """Re-send a message for every job still queued (messages may have died with an engine)."""
    queued = list(Job.objects.filter(deployment=deployment, status=JobStatus.QUEUED))
    for job in queued:
        wake(job)
    return len(queued)


def wake_if_stalled(deployment: Deployment, quiet_s: float) -> bool:
    """Send one message when jobs have waited `quiet_s` with nothing running and no message in the engine's
    queue: their messages were lost (a Redis restart drops what it had not saved). True if one was sent."""
    since = timezone.now() - timedelta(seconds=quiet_s)
    first = waiting(deployment.pk).filter(created__lt=since).first()
    if first is None or Job.objects.filter(deployment=deployment, status=JobStatus.RUNNING).exists():
        return False
    if stream.store().llen(deployment.queue):  # Celery's Redis transport keeps a queue's messages in a list
        return False
    wake(first)
    return True


def claim_next(deployment_id: int) -> Job | None:
    """The deployment's first waiting job, now RUNNING and ours; None if none waits (its message found
    the job it was sent for already run by an earlier message)."""
    while True:
        first = waiting(deployment_id).values_list("pk", flat=True).first()
        if first is None:
            return None
        job = claim(first)
        if job is not None:  # else cancelled a moment ago: the next one
            return job


def waiting(deployment_id: int):
    return Job.objects.filter(deployment=deployment_id, status=JobStatus.QUEUED).order_by(*ORDER)


def claim(job_id: int) -> Job | None:
    """The job, now RUNNING and ours, or None if it is no longer queued (done, cancelled, or taken)."""
    taken = Job.objects.filter(pk=job_id, status=JobStatus.QUEUED).update(
        status=JobStatus.RUNNING, started=timezone.now(), attempts=F("attempts") + 1)
    return Job.objects.select_related("deployment", "deployment__model").get(pk=job_id) if taken else None


def position(job: Job) -> int:
    """1 for the next job to run; 0 when it is not waiting."""
    if job.status != JobStatus.QUEUED:
        return 0
    earlier = Q(created__lt=job.created) | Q(created=job.created, pk__lt=job.pk)
    if job.batch_id is None:
        ahead = Q(batch__isnull=True) & earlier
    else:
        ahead = Q(batch__isnull=True) | Q(batch_id__lt=job.batch_id) | (Q(batch_id=job.batch_id) & earlier)
    return waiting(job.deployment_id).filter(ahead).count() + 1


def announce_positions(deployment_id: int) -> None:
    """Tell every waiting job's listeners where it now stands. Batch items are counted, not told: a batch
    page shows counts, and telling thousands of items after every job would cost more than the jobs.
    The others all come before them (ORDER), so their places are 1, 2, 3..."""
    others = waiting(deployment_id).filter(batch__isnull=True).values_list("pk", flat=True)
    for place, job_id in enumerate(others, start=1):
        broadcast(stream.group(job_id), "job.event", {"event": "queue", "position": place})


def cancel(job: Job) -> Job:
    """A queued job is cancelled at once; a running one stops within one token (the engine checks), or ends
    without its engine when none will: its deployment is gone, or the engine did not confirm in time."""
    if Job.objects.filter(pk=job.pk, status=JobStatus.QUEUED).update(status=JobStatus.CANCELLED,
                                                                       finished=timezone.now()):
        job.refresh_from_db()
        stream.announce_done(job)
        announce_positions(job.deployment_id)
    elif job.status == JobStatus.RUNNING:
        stop_running(job)
    return job


def stop_running(job: Job) -> None:
    from kombu.exceptions import OperationalError

    gone = Deployment.objects.filter(pk=job.deployment_id, status__in=GONE).first()
    if gone is not None:
        end_stopped(job.pk, job.attempts, f"Stopped. No engine runs it any more: its deployment is "
                                          f"{gone.get_status_display().lower()}.")
        return
    try:
        stream.ask_to_cancel(job.pk, cancel_key(job.pk))
        messages.confirm_stop(job.pk, job.attempts, STOP_CONFIRM_S)
    except (RedisError, OperationalError, OSError) as exc:
        end_stopped(job.pk, job.attempts, f"Stopped. Its engine could not be told (Redis did not answer: "
                                          f"{exc}), so the job was ended without it.")


def stop_unconfirmed(job_id: int, attempt: int) -> None:
    """STOP_CONFIRM_S after a stop: the job, if its engine has not ended it, ends now (an engine that is
    alive after all finds it ended and drops what it made)."""
    end_stopped(job_id, attempt, f"Stopped. Its engine had not ended it {STOP_CONFIRM_S} s later (still reading "
                                 "a long prompt, stuck, or not running), so the panel ended it.")


def end_stopped(job_id: int, attempt: int, why: str) -> None:
    if Job.objects.filter(pk=job_id, status=JobStatus.RUNNING, attempts=attempt).update(
            status=JobStatus.CANCELLED, finish_reason="cancelled", error=why, finished=timezone.now()):
        ended(Job.objects.get(pk=job_id))


def settle_abandoned(deployment_id: int | None = None) -> int:
    """Jobs still waiting or running on a deployment that stopped or failed: no engine will take or finish
    them, so they fail saying why. How many. (A degraded deployment's jobs are recovery's.)"""
    left = Job.objects.filter(status__in=(JobStatus.QUEUED, JobStatus.RUNNING), deployment__status__in=GONE)
    if deployment_id is not None:
        left = left.filter(deployment=deployment_id)
    settled = 0
    for job in left.select_related("deployment"):
        deployment = job.deployment
        when = "before it ran" if job.status == JobStatus.QUEUED else "while it ran"
        why = f"Its deployment {deployment.get_status_display().lower()} {when}. {deployment.status_detail}"
        if Job.objects.filter(pk=job.pk, status=job.status).update(status=JobStatus.FAILED, error=why.strip(),
                                                                   finished=timezone.now()):
            ended(Job.objects.get(pk=job.pk))
            settled += 1
    return settled


def ended(job: Job) -> None:
    """Tell a job's end, settled outside its engine, to whoever listens."""
    stream.announce_done(job)
    if job.batch_id:
        broadcast(f"batch_{job.batch_id}", "batch.progress", {"job": job.pk, "status": job.status})
