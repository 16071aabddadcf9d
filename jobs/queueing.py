"""Putting jobs in front of a deployment's engine, cancelling them, and telling where they stand.

Queue messages are only wake-up calls, one per job: each lets the engine claim,
in the database, the job that comes first (`claim_next`), so a message delivered
twice runs nothing twice, and an engine that starts re-sends the messages of
every job still queued. Which job comes first is `ORDER`: whatever people wait
for (chat, the APIs) before batch items, oldest first within each; a running
job is never interrupted, so a chat waits at most for the batch item under way.
"""

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from clusterpanel.broadcast import broadcast
from jobs import stream
from jobs.models import Job, JobStatus
from models_app.models import Deployment, DeploymentStatus

USABLE = (DeploymentStatus.READY, DeploymentStatus.DEGRADED)
ORDER = (F("batch_id").asc(nulls_first=True), "created", "pk")  # batches run in the order they came, too


class QueueError(Exception):
    pass


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
    transaction.on_commit(lambda: wake(job))
    return job


def submit_many(jobs: list[Job]) -> list[Job]:
    """Save new jobs for one deployment in one statement (a batch file's lines); wake the engine per job on commit."""
    if not jobs:
        return jobs
    check_deployment(jobs[0].deployment)
    saved = Job.objects.bulk_create(jobs)
    transaction.on_commit(lambda: [wake(job) for job in saved])
    return saved


def wake(job: Job) -> None:
    from jobs.tasks import run_job

    run_job.apply_async((job.pk,), queue=job.deployment.queue)


def wake_all(deployment: Deployment) -> int:
    """Re-send a message for every job still queued (messages may have died with an engine)."""
    queued = list(Job.objects.filter(deployment=deployment, status=JobStatus.QUEUED))
    for job in queued:
        wake(job)
    return len(queued)


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
    """A queued job is cancelled at once; a running one stops within one token (the engine checks)."""
    if Job.objects.filter(pk=job.pk, status=JobStatus.QUEUED).update(status=JobStatus.CANCELLED,
                                                                       finished=timezone.now()):
        job.refresh_from_db()
        stream.announce_done(job)
        announce_positions(job.deployment_id)
    elif job.status == JobStatus.RUNNING:
        stream.ask_to_cancel(job.pk, cancel_key(job.pk))
    return job
