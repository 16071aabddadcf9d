"""Putting jobs in front of a deployment's engine, and telling where they stand (jobs/queue/ending.py ends them
outside it).

Queue messages are only wake-up calls, one per job: each lets the engine claim,
in the database, the job that comes first (`claim_next`), so a message delivered
twice runs nothing twice, and an engine that starts re-sends the messages of
every job still queued. Which job comes first (`in_turn`): whatever people wait
for (chat, the APIs) before batch items. Among those, people take turns: a
job's turn is how many jobs its user has running on the deployment plus how
many of that user's own it waits behind, and jobs go by turn, then age; so one
person's fifty script requests do not keep another's chat waiting behind them
all. Jobs without a user take turns as one person. Batch items come after, in
the order their batches came and each batch in line order (`ORDER`), except
those whose owner has spent the day's tokens: they wait for the next day
(jobs/queue/admission.py). A running
job is never interrupted; an engine with free slots keeps one for people
(`claim_next(batch_allowed=False)`), so a chat need not wait for a batch item.
"""

import logging
from datetime import timedelta

from django.db import transaction
from django.db.models import BigIntegerField, F, Func, OuterRef, Q, Subquery, Value, Window
from django.db.models.functions import Coalesce, RowNumber
from django.utils import timezone

from clusterpanel.kit.broadcast import broadcast
from clusterpanel.kit.write_turns import promptly
from jobs import task_messages
from jobs.models import Job, JobStatus
from jobs.queue import admission, stream
from models_app.models import Deployment, DeploymentStatus
from nodes.models import NodeStatus

log = logging.getLogger(__name__)

USABLE = (DeploymentStatus.READY, DeploymentStatus.DEGRADED)
GONE = (DeploymentStatus.STOPPED, DeploymentStatus.FAILED)  # no engine runs their jobs, now or later
WOKEN = (DeploymentStatus.PLANNED, DeploymentStatus.PREPARING, DeploymentStatus.LOADING)  # on-call, loading
# Recovery (jobs/engine/recovery.py) prepares a deployment again once a laptop died under it, raising its revision:
# it served seconds ago and will again, so it takes jobs that wait, as it did while degraded (docs/api.md: "jobs
# sent to one deployment wait for its recovery"). A first prepare does not (revision 1), nor an on-call wake-up.
RECOVERING = Q(status__in=(DeploymentStatus.PREPARING, DeploymentStatus.LOADING), revision__gt=1, on_call=False)
ORDER = (F("batch_id").asc(nulls_first=True), "created", "pk")  # batches run in the order they came, too
NOBODY = Value(0, output_field=BigIntegerField())  # the one "person" of jobs without a user: no user has pk 0


def usable_deployments(offline_too: bool = False):
    """Deployments that take jobs, the default first, then the newest: what every door offers. Not those with a
    laptop offline (`Deployment.offline_laptops`) unless `offline_too`: for now they could not answer."""
    usable = Deployment.objects.filter(Q(status__in=USABLE) | RECOVERING)
    if not offline_too:
        usable = usable.exclude(stages__node__status=NodeStatus.OFFLINE)
    return usable.select_related("model").order_by("-is_default", "-created")


class QueueError(Exception):
    pass


class DeploymentGone(QueueError):
    """It stopped or failed since it was chosen (an idle on-call deployment unloaded, one evicted): a request
    routed by its model's name may be routed again."""


class QueueDown(Exception):
    """The job could not be handed to its engine (Redis, the broker, is unreachable): it is failed, not left
    waiting for a message that was never sent."""


def recovering(deployment: Deployment) -> bool:
    """Being prepared again by recovery (RECOVERING)."""
    return (deployment.status in (DeploymentStatus.PREPARING, DeploymentStatus.LOADING) and deployment.revision > 1
            and not deployment.on_call)


def check_deployment(deployment: Deployment) -> None:
    """Refused (QueueError) unless it takes jobs now, is being recovered, or is an on-call model's deployment being
    woken: its jobs wait for its engine (jobs/queue/wakeup.py, jobs/engine/recovery.py), or fail saying why if the
    load fails."""
    if deployment.status in GONE:
        raise DeploymentGone(f"Deployment #{deployment.pk} is {deployment.get_status_display().lower()}, "
                             "not ready: choose a ready deployment.")
    if not (deployment.status in USABLE or recovering(deployment) or deployment.on_call and deployment.status in WOKEN):
        raise QueueError(f"Deployment #{deployment.pk} is {deployment.get_status_display().lower()}, "
                         "not ready: choose a ready deployment.")
    offline = deployment.offline_laptops()
    if offline:
        raise QueueError(f"Deployment #{deployment.pk} cannot answer now: its laptop {', '.join(offline)} "
                         f"{'is' if len(offline) == 1 else 'are'} offline (no metrics for a few seconds: asleep, "
                         "frozen or off the network). Try again once the laptop is back.")


def submit(job: Job) -> Job:
    """Save a new job and wake its deployment's engine once the row is committed."""
    def save() -> None:
        with transaction.atomic():
            current(job.deployment)
            job.save()

    promptly(save)
    # after `promptly`: a hook inside would run within its tries (and with SQLite's wait off), and a hook's own
    # "locked" would save the job again
    transaction.on_commit(lambda: queued(job))
    return job


def current(deployment: Deployment) -> None:
    """Checked as it is now, its row held until the jobs are saved: the on-call scheduler stops an idle
    deployment only if no job is queued on it (jobs/queue/wakeup.py `stop_if_idle`), so one of the two waits
    for the other (SQLite's transactions here take turns; PostgreSQL locks the row), and a job is never left
    on a deployment stopped as it was saved."""
    fresh = (Deployment.objects.select_for_update().only("status", "on_call", "revision")
             .filter(pk=deployment.pk).first())
    if fresh is None:
        raise DeploymentGone(f"Deployment #{deployment.pk} was removed: choose a ready deployment.")
    deployment.status, deployment.on_call, deployment.revision = fresh.status, fresh.on_call, fresh.revision
    check_deployment(deployment)


def queued(job: Job) -> None:
    """Wake the engine; a job people wait for may go ahead of others waiting (they take turns): tell those
    behind it their new places."""
    hand_over(job)
    if job.batch_id is None:
        announce_positions(job.deployment_id, start=position(job) + 1)


def submit_many(jobs: list[Job]) -> list[Job]:
    """Save new jobs for one deployment in one statement (a batch file's lines); wake the engine per job on commit."""
    if not jobs:
        return jobs
    with transaction.atomic():
        current(jobs[0].deployment)
        saved = Job.objects.bulk_create(jobs)
        transaction.on_commit(lambda: hand_over_all(saved))
    return saved


def wake(job: Job) -> None:
    task_messages.run_job(job.pk, job.deployment.queue)


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
    first = (waiting(deployment.pk).filter(batch__isnull=True, created__lt=since).first()
             or batch_items_due(deployment.pk).filter(created__lt=since).first())  # held items are not stalled
    if first is None or Job.objects.filter(deployment=deployment, status=JobStatus.RUNNING).exists():
        return False
    if stream.store().llen(deployment.queue):  # Celery's Redis transport keeps a queue's messages in a list
        return False
    wake(first)
    return True


def claim_next(deployment_id: int, batch_allowed: bool = True) -> Job | None:
    """The deployment's first waiting job (`in_turn`, then batch items), now RUNNING and ours; None if none
    waits (its message found the job it was sent for already run by an earlier message). Without
    `batch_allowed`, batch items are passed over: the engine keeps that slot for people."""
    while True:
        first = next_in_line(deployment_id, batch_allowed)
        if first is None:
            return None
        job = claim(first, deployment_id)
        if job is not None:  # else cancelled (or moved to another replica) a moment ago: the next one
            return job


def next_in_line(deployment_id: int, batch_allowed: bool) -> int | None:
    first = in_turn(deployment_id).values_list("pk", flat=True).first()
    if first is None and batch_allowed:
        first = batch_items_due(deployment_id).values_list("pk", flat=True).first()
    return first


def batch_items_due(deployment_id: int):
    """The waiting batch items that may run now: not those whose owner or token has spent the day's tokens
    (jobs/queue/admission.py), which wait for the next day rather than fail."""
    items = waiting(deployment_id).filter(batch__isnull=False)
    held = admission.held_items(items)
    return items if held is None else items.exclude(held)


def claim(job_id: int, deployment_id: int | None = None) -> Job | None:
    """The job, now RUNNING and ours, or None if it is no longer queued (done, cancelled, or taken) or, with
    `deployment_id`, no longer that deployment's (failover moved it: jobs/queue/failover.py). An item of a
    cancelled batch is cancelled instead, whenever it was queued (a retry that recovery queued as the batch
    was being cancelled): the claim is where every run starts, so none slips past."""
    queued = Job.objects.filter(pk=job_id, status=JobStatus.QUEUED)
    if deployment_id is not None:
        queued = queued.filter(deployment=deployment_id)
    taken = promptly(lambda: queued.filter(Q(batch__isnull=True) | Q(batch__cancelled__isnull=True)).update(
        status=JobStatus.RUNNING, started=timezone.now(), attempts=F("attempts") + 1))
    if taken:
        return Job.objects.select_related("deployment", "deployment__model").get(pk=job_id)
    queued.filter(batch__cancelled__isnull=False).update(status=JobStatus.CANCELLED, finish_reason="cancelled",
                                                         finished=timezone.now())
    return None


def waiting(deployment_id: int):
    """Every waiting job, people's before batch items; among people's, oldest first, not in turn (`in_turn`)."""
    return Job.objects.filter(deployment=deployment_id, status=JobStatus.QUEUED).order_by(*ORDER)


def person():
    return Coalesce("user_id", NOBODY, output_field=BigIntegerField())


def in_turn(deployment_id: int):
    """The waiting interactive jobs (batch_id null) in the order they run: by turn, then age. A job's turn is
    what its user has running on the deployment plus the user's own interactive jobs waiting ahead of it.
    Claiming a job leaves every other's turn as it was (one running more, one waiting ahead fewer), so this
    order holds until a job ends or a new one comes. One query, however many wait."""
    running = (Job.objects.filter(deployment=deployment_id, status=JobStatus.RUNNING)
               .annotate(person=person()).filter(person=OuterRef("person"))
               .order_by().annotate(n=Func("pk", function="COUNT")).values("n"))  # one count, no GROUP BY
    ahead_of_own = Window(RowNumber(), partition_by=F("person"), order_by=[F("created").asc(), F("pk").asc()])
    return (waiting(deployment_id).filter(batch__isnull=True).annotate(person=person())
            .annotate(turn=Coalesce(Subquery(running), 0) + ahead_of_own - 1)
            .order_by("turn", "created", "pk"))


def earlier(job: Job) -> Q:
    return Q(created__lt=job.created) | Q(created=job.created, pk__lt=job.pk)


def position(job: Job) -> int:
    """1 for the next job to be claimed; 0 when it is not waiting."""
    if job.status != JobStatus.QUEUED:
        return 0
    if job.batch_id is None:
        # Its place in one reading of the queue: its turn read apart from the others' once counted the job
        # itself ahead of it, when its user's running job ended in between (a parallel test run).
        order = list(in_turn(job.deployment_id).values_list("pk", flat=True))
        return order.index(job.pk) + 1 if job.pk in order else 0
    ahead = Q(batch__isnull=True) | Q(batch_id__lt=job.batch_id) | (Q(batch_id=job.batch_id) & earlier(job))
    return waiting(job.deployment_id).filter(ahead).count() + 1


def announce_positions(deployment_id: int, start: int = 1) -> None:
    """Tell each waiting interactive job's listeners where it now stands, from place `start` on (those before
    it did not move). Batch items are counted, not told: a batch page shows counts, and telling thousands of
    items after every job would cost more than the jobs; they all come after these (ORDER)."""
    others = in_turn(deployment_id).values_list("pk", flat=True)[start - 1:]
    for place, job_id in enumerate(others, start=start):
        broadcast(stream.group(job_id), "job.event", {"event": "queue", "position": place})
