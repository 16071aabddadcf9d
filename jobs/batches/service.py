"""Batches: a file's good lines queued as jobs in one go, their counts, cancelling what is left.

An input line may have several jobs when a laptop died under it (each retry is a
new job, `retry_of` the one before); the line's outcome is its last job's, the
one nothing retried.
"""

from django.conf import settings
from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from clusterpanel.kit.broadcast import broadcast
from jobs.batches import batchfile, files
from jobs.batches.batchfile import Parsed
from jobs.models import ApiFile, Batch, Job, JobKind, JobStatus, awaiting_retry
from jobs.queue import admission, ending, queueing
from models_app.models import Deployment

STATUSES = [status.value for status in JobStatus]
COUNTED = [JobStatus.QUEUED.value, JobStatus.RUNNING.value, "retrying", JobStatus.SUCCEEDED.value,
           JobStatus.FAILED.value, JobStatus.CANCELLED.value]  # as the Batches page shows them


def group(batch_id: int) -> str:
    return f"batch_{batch_id}"


def from_file(user, deployment: Deployment, name: str, data: bytes, input_file: ApiFile | None = None,
              endpoint: str | None = None, metadata: dict | None = None, api_token=None) -> Batch:
    """A batch of the file's good lines; FileRefused (with the rejected lines) when it has none. The file is kept
    as the batch's input file (OpenAI's Files API shows it), or is `input_file` already. `endpoint` is given by
    the OpenAI door: the file is read as JSONL, every line must name that endpoint, and a line naming a model
    must name the deployment's (a batch runs on one model, as OpenAI's do). `api_token`: the token it came
    with, whose daily tokens its lines count against (a batch is never refused for a limit: its lines wait)."""
    parsed = batchfile.parse(name, data, settings.BATCH_MAX_LINES, max_tokens_limit=deployment.ctx,
                             kind="jsonl" if endpoint else None)
    if endpoint:
        hold_to_the_batch(parsed, endpoint, deployment)
    if not parsed.requests:
        raise batchfile.FileRefused(f"No line of the file can run ({len(parsed.rejected)} rejected); "
                                    "nothing was queued. Fix the lines below and upload it again.", parsed.rejected)
    stored = input_file is None
    input_file = input_file or files.store(user, name, data)
    try:
        return create(user, deployment, name, parsed, input_file.public_id, metadata or {}, api_token)
    except Exception:  # all or nothing: the file kept for the batch goes with it
        if stored:
            input_file.delete()
        raise


def hold_to_the_batch(parsed: Parsed, endpoint: str, deployment: Deployment) -> None:
    """Rejects the lines that name another endpoint, or another model, than the batch's."""
    for request in list(parsed.requests):
        if request.url != endpoint:
            parsed.reject(request.line, f"url must be {endpoint!r}, the batch's endpoint.", request.custom_id)
        elif request.model not in (None, "", *deployment.model_ids):  # none: as /v1/chat/completions, the default
            parsed.reject(request.line, f"body.model {batchfile.shown(request.model)} is not "
                          f"{deployment.model.name}, the model this batch runs on (its first request's): a batch "
                          "runs on one model, so send the requests for another model as a batch of their own.",
                          request.custom_id, "model_not_found")
        else:
            continue
        parsed.requests.remove(request)
    parsed.rejected.sort(key=lambda bad: bad["line"])


def create(user, deployment: Deployment, name: str, parsed: Parsed, input_file_id: str = "",
           metadata: dict | None = None, api_token=None) -> Batch:
    """The batch and a queued job per good line, all or nothing; the engine is woken once they are committed."""
    queueing.check_deployment(deployment)
    try:
        with transaction.atomic():
            batch = Batch.objects.create(user=user, deployment=deployment, name=name[:200],
                                         input_format=parsed.format, rejected=parsed.rejected,
                                         endpoint=parsed.requests[0].url, input_file_id=input_file_id,
                                         metadata=metadata or {})
            queueing.submit_many([
                Job(kind=JobKind.BATCH_ITEM, deployment=deployment, user=user, api_token=api_token, batch=batch,
                    line=request.line, custom_id=request.custom_id, messages=request.messages,
                    prompt=request.prompt, inputs=request.inputs, params=request.params)
                for request in parsed.requests])
    except queueing.QueueDown as exc:  # committed, but the engine could not be told: all or nothing still
        batch.delete()
        raise queueing.QueueError(f"Nothing was queued: {exc}. Upload the file again in a moment.") from None
    return batch


def visible(user):
    """The batches a person may see: their own; a lab admin's, everyone's."""
    everything = Batch.objects.select_related("user", "deployment__model").order_by("-created", "-pk")
    return everything if user.is_lab_admin else everything.filter(user=user)


def own(user, pk) -> Batch | None:
    """Batch `pk` if `user` may see it; None otherwise (another's is not confirmed to exist)."""
    if isinstance(pk, bool) or not isinstance(pk, int) or not 0 < pk < 2**63:
        return None
    return visible(user).filter(pk=pk).first()


def last_attempts(batch: Batch):
    """Each input line's last job (the one no retry replaced)."""
    return batch.items.filter(retry__isnull=True)


def counts(batch: Batch) -> dict:
    """Items by status. One a laptop's death failed is `retrying` (not yet done) until recovery queues its retry
    or says why none comes: a batch is not finished, nor are its results written, while one may still run."""
    rows = last_attempts(batch).order_by().values("status").annotate(n=Count("pk"),
                                                                       waiting=Count("pk", filter=awaiting_retry()))
    by_status = {row["status"]: row["n"] - row["waiting"] for row in rows}
    result = {status: by_status.get(status, 0) for status in STATUSES}
    result["retrying"] = sum(row["waiting"] for row in rows)
    total = sum(result.values())
    done = total - result[JobStatus.QUEUED] - result[JobStatus.RUNNING] - result["retrying"]
    return {**result, "total": total, "done": done, "rejected": len(batch.rejected),
            "finished": done == total, "cancelled_at": batch.cancelled.isoformat() if batch.cancelled else None}


def held(batch: Batch, counted: dict) -> str | None:
    """Why its waiting items do not run, when its owner (or the token it came with) has spent the day's tokens;
    None when nothing of it waits, or nothing holds it."""
    if not counted[JobStatus.QUEUED]:
        return None
    waiting = batch.items.filter(status=JobStatus.QUEUED, api_token__isnull=False)
    return admission.batch_hold(batch.user, set(waiting.values_list("api_token_id", flat=True).distinct()))


def cancel_remaining(batch: Batch) -> int:
    """Cancel every item not yet started; running ones stop within a token. How many were stopped."""
    now = timezone.now()
    if counts(batch)["finished"]:
        return 0  # everything ended: a finished batch stays as it ended
    with transaction.atomic():
        Batch.objects.filter(pk=batch.pk, cancelled__isnull=True).update(cancelled=now)
        stopped = batch.items.filter(status=JobStatus.QUEUED).update(status=JobStatus.CANCELLED, finished=now)
    running = list(batch.items.filter(status=JobStatus.RUNNING))
    for job in running:
        ending.cancel(job)
    retrying = last_attempts(batch).filter(awaiting_retry()).count()  # recovery sees the cancel: no retry comes
    batch.refresh_from_db()
    queueing.announce_positions(batch.deployment_id)
    broadcast(group(batch.pk), "batch.progress", {"cancelled": stopped})
    return stopped + len(running) + retrying


class StillRunning(ValueError):
    pass


def deletion(batch: Batch) -> list[str]:
    """What deleting the batch ends, or StillRunning: an item the engine holds must end before its row goes."""
    counted = counts(batch)
    unfinished = counted["total"] - counted["done"]
    if unfinished:
        raise StillRunning(f"{unfinished} of its requests are still running or waiting: cancel the remaining "
                           "ones first, then delete the batch.")
    return [f"Batch #{batch.pk} ({batch.name}) and the results of its {counted['total']} requests are deleted "
            "for good; download them first if you need them."]


def delete(batch: Batch) -> None:
    with transaction.atomic():
        locked = Batch.objects.select_for_update().filter(pk=batch.pk).first()
        if locked is None:
            return
        deletion(locked)
        locked.delete()
        if locked.input_file_id and not Batch.objects.filter(input_file_id=locked.input_file_id).exists():
            ApiFile.objects.filter(public_id=locked.input_file_id).delete()  # its prompts go with it
