"""Jobs ended outside their engine: a cancel, a stop the engine never confirms, a deployment gone, a retry
that parts from what its client was told, an attempt a dying engine dropped. Each keeps, as its output, the
text its client was told, so its row and the client agree; each is counted in its deployment's tallies and the
usage ledger in the transaction that ends it, then told to its listeners."""

import logging

from django.db import transaction
from django.utils import timezone
from redis.exceptions import RedisError

from clusterpanel.kit.broadcast import broadcast
from jobs import task_messages
from jobs.models import TALLIED_SECONDS, Job, JobStatus, Tally, Usage
from jobs.queue import stream
from jobs.queue.queueing import GONE, announce_positions
from models_app.models import Deployment

log = logging.getLogger(__name__)

# How long a running job's engine has to confirm a stop before the job ends without it. The engine looks between
# tokens: reading a long prompt on slow laptops can take tens of seconds before the first.
STOP_CONFIRM_S = 60


def cancel_key(job_id: int) -> str:
    return f"job:{job_id}:cancel"


def cancel(job: Job, heard: str = "") -> Job:
    """A queued job is cancelled at once; a running one stops within one token (the engine checks), or ends
    without its engine when none will: its deployment is gone, or the engine did not confirm in time. `heard`:
    the text its client was sent, which its row keeps where the attempt running now has not said it (yet)."""
    told = (stream.told(job.pk) or "") if job.started else ""  # a retry waiting: its first attempt was heard
    behind = bool(heard) and not told.startswith(heard)
    if behind:
        told = heard
    if Job.objects.filter(pk=job.pk, status=JobStatus.QUEUED).update(status=JobStatus.CANCELLED, output=told,
                                                                       finished=timezone.now()):
        job.refresh_from_db()
        stream.announce_done(job)
        announce_positions(job.deployment_id)
        return job
    job.refresh_from_db()  # an engine may have claimed it since it was read: what it is now decides
    if job.status == JobStatus.RUNNING:
        # a retry behind its client (the engine's worker died under the first attempt) ends with the client's text
        if not (behind and end_with_told(job, heard, status=JobStatus.CANCELLED, finish_reason="cancelled")):
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
        task_messages.confirm_stop(job.pk, job.attempts, STOP_CONFIRM_S)
    except (RedisError, OperationalError, OSError) as exc:
        end_stopped(job.pk, job.attempts, f"Stopped. Its engine could not be told (Redis did not answer: "
                                          f"{exc}), so the job was ended without it.")


def stop_unconfirmed(job_id: int, attempt: int) -> None:
    """STOP_CONFIRM_S after a stop: the job, if its engine has not ended it, ends now (an engine that is
    alive after all finds it ended and drops what it made)."""
    end_stopped(job_id, attempt, f"Stopped. Its engine had not ended it {STOP_CONFIRM_S} s later (still reading "
                                 "a long prompt, stuck, or not running), so the panel ended it.")


def end_stopped(job_id: int, attempt: int, why: str) -> None:
    job = Job.objects.filter(pk=job_id).first()
    if job is not None and settle(job, {"status": JobStatus.RUNNING, "attempts": attempt},
                                  status=JobStatus.CANCELLED, finish_reason="cancelled", error=why):
        announce_positions(job.deployment_id)  # its user's waiting jobs' turns came closer


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
        if settle(job, {"status": job.status}, status=JobStatus.FAILED, error=why.strip()):
            settled += 1
    return settled


def settle(job: Job, still: dict, **fields) -> bool:
    """End a job outside its engine if its row is still as `still` says: the update and its tally in one
    transaction, then its listeners told. It keeps the text its stream carried, unless `fields` say its output:
    its row and its client agree. Whether it was ended here."""
    tokens = tokens_streamed(job)
    if "output" not in fields and job.started and (told := stream.told(job.pk)):
        fields["output"] = told
    with transaction.atomic():
        if not Job.objects.filter(pk=job.pk, **still).update(finished=timezone.now(), **fields):
            return False
        job.refresh_from_db()
        tally(job, tokens, job.seconds_to(job.finished, job.first_token))
    ended(job)
    return True


def part(job_id: int, told: str, why: str) -> bool:
    """A stream had sent `told` when the job's retry said something else: the job ends FAILED with what its
    client was told and why it stopped, so its row and the client agree, and its engine stops the retry (which
    then writes nothing: the row no longer holds that attempt). Whether it was ended here."""
    job = Job.objects.filter(pk=job_id).first()
    if job is None or job.is_finished:
        return False
    return end_with_told(job, told, status=JobStatus.FAILED, error=why)


def end_with_told(job: Job, told: str, **fields) -> bool:
    """The job, as it is now, ended with `told`, the text its client has, so its row and the client agree; a
    running attempt is told to stop, and writes nothing (the row no longer holds it). Whether it was ended here."""
    was = job.status
    if not settle(job, {"status": was, "attempts": job.attempts}, output=told, **fields):
        return False
    if was == JobStatus.RUNNING:
        try:
            stream.ask_to_cancel(job.pk, cancel_key(job.pk))
        except (RedisError, OSError) as exc:  # the retry runs to its end, and writes nothing
            log.warning("job %s: could not stop its retry: %s", job.pk, exc)
    return True


def requeue(job: Job) -> None:
    """A job its engine dropped when it stopped waits again; the tokens its attempt streamed stay counted. One
    whose client had asked it to stop ends instead, with the text its client was told: the engine died before
    it stopped it, and its next attempt would say something else to nobody, and keep that (the chaos soak)."""
    if cancel_asked(job.pk):
        end_stopped(job.pk, job.attempts, "Stopped as asked; its engine stopped at the same moment, so the panel "
                                          "ended it.")
        return
    tokens = tokens_streamed(job)
    with transaction.atomic():
        if Job.objects.filter(pk=job.pk, status=JobStatus.RUNNING).update(status=JobStatus.QUEUED):
            tally(job, tokens, {})


def cancel_asked(job_id: int) -> bool:
    """Whether a stop was asked for the job (and not yet carried out). Redis away, it was not: a stop asked
    meanwhile could not be stored either, and an engine runs the job (its events wait for Redis in the stream)
    rather than failing it for an outage that costs it nothing."""
    try:
        return bool(stream.store().exists(cancel_key(job_id)))
    except (RedisError, OSError) as exc:
        log.info("job %s: could not ask Redis whether it was cancelled (%s)", job_id, exc)
        return False


def tokens_streamed(job: Job) -> int | None:
    """The tokens a running job's stream holds: what /metrics counted while it ran. Read before a transaction
    that ends the job: a Redis read must not hold the database's lock."""
    return stream.tokens_sent([job.pk])[job.pk] if job.started else None


def tally(job: Job, tokens: int | None, seconds: dict, spent: tuple[int | None, int | None] = (None, None)) -> None:
    """Count a job that ended (or an attempt that was cut short) in its deployment's tallies, in the
    transaction that ended it, so /metrics' counters only grow. Its row is already updated; its deployment's
    is locked next, the order in which removing a deployment takes them; one removed meanwhile counts nothing
    (its tallies went with it) rather than failing the job's end. `spent`: the prompt and answer tokens its end
    wrote on its row, which go into the usage ledger (daily limits, the usage page)."""
    if job.deployment_id is not None and Deployment.objects.select_for_update().filter(
            pk=job.deployment_id).values_list("pk", flat=True).first():
        Tally.count_ended(job.deployment_id, tokens, {name: seconds.get(name) for name in TALLIED_SECONDS})
    Usage.add(job, *spent)


def ended(job: Job) -> None:
    """Tell a job's end, settled outside its engine, to whoever listens."""
    stream.announce_done(job)
    if job.batch_id:
        broadcast(f"batch_{job.batch_id}", "batch.progress", {"job": job.pk, "status": job.status})
