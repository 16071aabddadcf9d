"""/api/batches/: a file of prompts (OpenAI Batch JSONL or CSV) queued as one batch, its counts followed live,
cancelled, its results downloaded in either format, deleted — the Batches page's services, for scripts.
Anyone's own batches; a lab admin's, everyone's."""

from datetime import datetime
from typing import Literal

from asgiref.sync import sync_to_async
from django.http import HttpRequest
from ninja import Field, File, Form, Query, Router, Schema, Status
from ninja.files import UploadedFile

from clusterpanel.accounts.apiauth import caller, own_or_everyones
from clusterpanel.kit.apikit import (
    ApiError,
    Page,
    Paging,
    described_as_events,
    errors,
    event_stream,
    follow,
    form_refusal,
    paged,
)
from jobs.api import inputs
from jobs.api.inputs import InputError
from jobs.batches import output
from jobs.batches import service as batches
from jobs.batches.batchfile import FileRefused
from jobs.batches.forms import BatchUploadForm
from jobs.models import Batch
from jobs.queue.queueing import QueueError

router = Router()


class Rejected(Schema):
    line: int
    reason: str


class Counts(Schema):
    queued: int
    running: int
    retrying: int = Field(description="Failed when a laptop died; recovery is bringing the deployment back to "
                                      "retry them. Not done yet.")
    succeeded: int
    failed: int
    cancelled: int
    total: int
    done: int
    rejected: int
    finished: bool
    cancelled_at: str | None


class BatchOut(Schema):
    id: int
    name: str
    user: str
    deployment: int | None
    input_format: str
    created: datetime
    counts: Counts
    rejected: list[Rejected] = Field(description="Lines of the file that could not run, and why (the first 200).")
    results: dict[str, str] = Field(description="Where its results are, as JSONL and as CSV.")
    held: str | None = Field(description="Why its waiting requests do not run now (its owner, or the token it "
                                         "came with, spent the day's tokens: they go on at midnight UTC); "
                                         "null when nothing holds them.")
    url: str
    events: str


def batch_row(batch: Batch) -> dict:
    base, counted = f"/api/batches/{batch.pk}/", batches.counts(batch)
    return {"id": batch.pk, "name": batch.name, "user": batch.user.username, "deployment": batch.deployment_id,
            "input_format": batch.input_format, "created": batch.created, "counts": counted,
            "held": batches.held(batch, counted),
            "rejected": batch.rejected[:200], "url": base, "events": f"{base}events/",
            "results": {"jsonl": f"{base}results/?format=jsonl", "csv": f"{base}results/?format=csv"}}


def own_batch(request: HttpRequest, pk: int) -> Batch:
    found = batches.own(caller(request), pk)
    if found is None:
        raise ApiError(f"There is no batch {pk} of yours.", 404)  # others' ids are not confirmed
    return found


@router.post("/", response={201: BatchOut, **errors(404, 409, 413, 503)},
             summary="Queue a batch: a JSONL (OpenAI Batch) or CSV file of requests")
def upload_batch(request: HttpRequest, file: File[UploadedFile],
           deployment: int | None = Form(None, description="A deployment's id; none: the default ready one.")):
    user = caller(request)
    try:
        chosen = inputs.deployment_for(None) if deployment is None else deployment
    except InputError as exc:
        raise ApiError(str(exc), exc.status, "deployment") from None
    form = BatchUploadForm({"deployment": getattr(chosen, "pk", chosen)}, {"file": file})
    if not form.is_valid():
        raise form_refusal(form)
    try:
        batch = batches.from_file(user, form.cleaned_data["deployment"], file.name or "batch", file.read(),
                                  api_token=getattr(request, "api_token", None))
    except FileRefused as exc:
        said = "; ".join(f"line {r['line']}: {r['reason']}" for r in exc.rejected[:5])
        raise ApiError(f"{exc} {said}".strip(), 400, "file") from None
    except QueueError as exc:
        raise ApiError(str(exc), 503, "deployment") from None
    return Status(201, batch_row(batch))


@router.get("/", response={200: Page[BatchOut], **errors(403)}, summary="List batches, newest first")
def list_batches(request: HttpRequest, *,
                 all: bool = Query(False, description="Everyone's (lab admins only)."), paging: Query[Paging]):
    listed = own_or_everyones(request, batches.visible(caller(request)), all, "batches")
    return paged(request, listed, batch_row, paging)


@router.get("/{int:pk}/", response={200: BatchOut, **errors(404)}, summary="A batch: counts and rejected lines")
def get_batch(request: HttpRequest, pk: int):
    return batch_row(own_batch(request, pk))


@router.get("/{int:pk}/events/", response=errors(404), openapi_extra=described_as_events(BatchOut),
            summary="Follow a batch's counts live until every request has ended")
async def follow_batch(request: HttpRequest, pk: int):
    batch = await sync_to_async(own_batch)(request, pk)

    def snapshot() -> dict | None:
        found = Batch.objects.select_related("user").filter(pk=batch.pk).first()
        return batch_row(found) if found else None

    return event_stream(follow(snapshot, lambda state: state["counts"]["finished"]))


@router.post("/{int:pk}/cancel/", response={200: BatchOut, **errors(404)},
             summary="Cancel what has not run yet; running requests stop within a token")
def cancel(request: HttpRequest, pk: int):
    batch = own_batch(request, pk)
    batches.cancel_remaining(batch)
    return batch_row(batch)


@router.get("/{int:pk}/results/", response=errors(404), summary="Its results so far, as JSONL or CSV",
            openapi_extra={"responses": {"200": {"description": "One line per request, in the input's order.",
                                                 "content": {"application/jsonl": {"schema": {"type": "string"}},
                                                             "text/csv": {"schema": {"type": "string"}}}}}})
def results(request: HttpRequest, pk: int, format: Literal["jsonl", "csv"] = "jsonl"):
    return output.download(own_batch(request, pk), format)


@router.delete("/{int:pk}/", response={204: None, **errors(404, 409)}, summary="Delete a batch with its results")
def delete(request: HttpRequest, pk: int):
    batch = own_batch(request, pk)
    try:
        batches.deletion(batch)
        batches.delete(batch)
    except batches.StillRunning as exc:
        raise ApiError(str(exc), 409) from None
    return Status(204, None)
