"""/v1/files and /v1/batches as OpenAI defines them, so the official `openai` client works unchanged:
upload a batch file, start a batch from it, follow, list and cancel it, download its output and error files.
They are the Batches page's batches (one system, two doors): a batch started here shows there, and one
uploaded there is listed here with its input file."""

import json
from collections.abc import Callable
from functools import wraps

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from clusterpanel.accounts import apiauth
from jobs.api import inputs, openai_api
from jobs.api.inputs import InputError
from jobs.api.openai_views import refused
from jobs.batches import files, output
from jobs.batches import service as batches
from jobs.batches.batchfile import ENDPOINTS, FileRefused
from jobs.batches.files import FileError
from jobs.models import ApiFile, Batch
from jobs.queue.queueing import QueueError

FILES_LIMIT, BATCHES_LIMIT = (10_000, 10_000), (20, 100)  # OpenAI's default and most per page
METADATA = (16, 64, 512)  # OpenAI's limits: pairs, key length, value length


def door(*methods: str) -> Callable:
    """A /v1 view for keys: the caller in `request.user`, errors in OpenAI's shape."""
    def decorate(view: Callable) -> Callable:
        @login_not_required
        @csrf_exempt
        @wraps(view)
        def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            try:
                request.user = apiauth.authenticate(request, session=False)
            except apiauth.Unauthorized as exc:
                return refused(exc)
            if request.method not in methods:
                return failed(405, f"Use {' or '.join(methods)}.")
            try:
                return view(request, *args, **kwargs)
            except (InputError, FileError) as exc:
                return failed(exc.status, str(exc), exc.param, getattr(exc, "code", None))
        return wrapped
    return decorate


def failed(status: int, message: str, param: str | None = None, code: str | None = None) -> JsonResponse:
    return JsonResponse(openai_api.error(message, param, code, openai_api.kind_of(status)), status=status)


def file_object(file: ApiFile) -> dict:
    return {"id": file.public_id, "object": "file", "bytes": file.size, "created_at": int(file.created.timestamp()),
            "filename": file.filename, "purpose": file.purpose, "status": "processed", "expires_at": None,
            "status_details": None}


def listed(objects: list, shape: Callable, limit: int) -> JsonResponse:
    data = [shape(item) for item in objects[:limit]]
    return JsonResponse({"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
                         "last_id": data[-1]["id"] if data else None, "has_more": len(objects) > limit})


def page_limit(request: HttpRequest, limits: tuple[int, int]) -> int:
    default, most = limits
    raw = request.GET.get("limit", str(default))
    if not raw.isascii() or not raw.isdigit() or not 1 <= int(raw) <= most:
        raise InputError(f"limit must be a whole number from 1 to {most:,}.", "limit")
    return int(raw)


def ordered(request: HttpRequest, found, after):
    """`found` in the order asked for (`order`: desc, newest first, or asc), from past `after` if given."""
    order = request.GET.get("order", "desc")
    if order not in ("asc", "desc"):
        raise InputError(f"order must be asc or desc, not {order!r}.", "order")
    if after is not None:
        found = found.filter(pk__gt=after.pk) if order == "asc" else found.filter(pk__lt=after.pk)
    return found.order_by("pk" if order == "asc" else "-pk")


@door("GET", "POST")
def file_list(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        upload = request.FILES.get("file")
        if upload is None:
            raise InputError("Send the file as multipart/form-data field `file`, with `purpose` \"batch\".", "file")
        return JsonResponse(file_object(files.upload(request.user, upload.name, upload.read(),
                                                     request.POST.get("purpose", ""))))
    found = files.visible(request.user).filter(user=request.user)
    purpose = request.GET.get("purpose")
    if purpose:
        if purpose not in ("batch", "batch_output"):
            raise InputError("purpose must be batch or batch_output.", "purpose")
        found = found.filter(purpose=purpose)
    after = request.GET.get("after")
    found = ordered(request, found, files.find(request.user, after) if after else None)
    limit = page_limit(request, FILES_LIMIT)
    return listed(list(found[:limit + 1]), file_object, limit)


@door("GET", "DELETE")
def file_detail(request: HttpRequest, file_id: str) -> HttpResponse:
    file = files.find(request.user, file_id)
    if request.method == "DELETE":
        file.delete()
        return JsonResponse({"id": file_id, "object": "file", "deleted": True})
    return JsonResponse(file_object(file))


@door("GET")
def file_content(request: HttpRequest, file_id: str) -> HttpResponse:
    file = files.find(request.user, file_id)
    response = HttpResponse(files.content(file), content_type="application/octet-stream")
    response["Content-Disposition"] = f'attachment; filename="{file.public_id}.jsonl"'
    return response


def status_of(batch: Batch, counts: dict) -> str:
    if batch.cancelled:
        return "cancelled" if counts["finished"] else "cancelling"
    return "completed" if counts["finished"] else "in_progress"


def batch_object(batch: Batch) -> dict:
    counts = batches.counts(batch)
    made = output.openai_files(batch, counts["finished"])
    last_end = batch.items.exclude(finished=None).order_by("-finished").values_list("finished", flat=True).first()
    status = status_of(batch, counts)

    def at(moment) -> int | None:
        return int(moment.timestamp()) if moment else None

    errors = [{"code": bad.get("code", "invalid_request"), "message": bad["reason"], "param": None, "line": bad["line"]}
              for bad in batch.rejected[:1000]]
    return {
        "id": f"batch_{batch.pk}", "object": "batch", "endpoint": batch.endpoint, "input_file_id": batch.input_file_id,
        "completion_window": "24h", "status": status, "created_at": at(batch.created),
        "in_progress_at": at(batch.created), "expires_at": None,
        "finalizing_at": at(last_end) if status == "completed" else None,
        "completed_at": at(last_end) if status == "completed" else None,
        "cancelling_at": at(batch.cancelled), "cancelled_at": at(last_end or batch.cancelled)
        if status == "cancelled" else None, "failed_at": None, "expired_at": None,
        "output_file_id": made["output"].public_id if "output" in made else None,
        "error_file_id": made["error"].public_id if "error" in made else None,
        "errors": {"object": "list", "data": errors} if errors else None,
        "request_counts": {"total": counts["total"] + counts["rejected"], "completed": counts["succeeded"],
                           "failed": counts["failed"] + counts["cancelled"] + counts["rejected"]},
        "metadata": batch.metadata or None, "model": batch.deployment.model.name if batch.deployment else None,
    }


def own_batch(request: HttpRequest, batch_id: str) -> Batch:
    number = batch_id.removeprefix("batch_")
    found = None
    if batch_id.startswith("batch_") and number.isascii() and number.isdigit() and len(number) < 20:
        found = batches.own(request.user, int(number))
    if found is None:
        raise InputError(f"No batch found with id '{batch_id}'.", "batch_id", status=404)
    return found


@door("GET", "POST")
def batch_list(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        return start_batch(request, inputs.json_body(request))
    found = Batch.objects.select_related("deployment__model").filter(user=request.user)
    after = request.GET.get("after")
    if after:
        found = found.filter(pk__lt=own_batch(request, after).pk)
    limit = page_limit(request, BATCHES_LIMIT)
    return listed(list(found.order_by("-pk")[:limit + 1]), batch_object, limit)


def start_batch(request: HttpRequest, body: dict) -> HttpResponse:
    unknown = sorted(set(body) - {"input_file_id", "endpoint", "completion_window", "metadata",
                                  "output_expires_after"})
    if unknown:
        raise InputError(f"Unknown parameter: {unknown[0]!r}.", unknown[0])
    if body.get("endpoint") not in ENDPOINTS:
        raise InputError(f"endpoint must be {' or '.join(ENDPOINTS)}, not {json.dumps(body.get('endpoint'))}.",
                         "endpoint")
    if body.get("completion_window") != "24h":
        raise InputError("completion_window must be \"24h\".", "completion_window")
    metadata = checked_metadata(body.get("metadata"))
    source = files.find(request.user, body.get("input_file_id"))
    if source.purpose != "batch":
        raise InputError(f"{source.public_id} is a batch's output, not a batch input file.", "input_file_id")
    data = files.content(source)
    deployment = inputs.deployment_for(model_of(data))
    try:
        batch = batches.from_file(request.user, deployment, source.filename, data, input_file=source,
                                  endpoint=body["endpoint"], metadata=metadata,
                                  api_token=getattr(request, "api_token", None))
    except FileRefused as exc:
        said = "; ".join(f"line {r['line']}: {r['reason']}" for r in exc.rejected[:5])
        raise InputError(f"{exc} {said}".strip(), "input_file_id") from None
    except QueueError as exc:
        raise InputError(str(exc), status=503) from None
    return JsonResponse(batch_object(batch))


def checked_metadata(value) -> dict:
    pairs, key_chars, value_chars = METADATA
    if value is None:
        return {}
    if not isinstance(value, dict) or len(value) > pairs or not all(
            isinstance(k, str) and isinstance(v, str) and len(k) <= key_chars and len(v) <= value_chars
            and k.isprintable() and v.isprintable() for k, v in value.items()):
        raise InputError(f"metadata must be an object of at most {pairs} strings, keys up to {key_chars} "
                         f"characters and values up to {value_chars}.", "metadata")
    return value


def model_of(data: bytes) -> str | None:
    """The model the file's first line asks for (a batch runs on one deployment), if it names one."""
    for raw in data.split(b"\n"):
        if raw.strip():
            try:
                model = json.loads(raw).get("body", {}).get("model")
            except (ValueError, AttributeError, RecursionError):
                return None
            return model if isinstance(model, str) else None
    return None


@door("GET")
def batch_detail(request: HttpRequest, batch_id: str) -> HttpResponse:
    return JsonResponse(batch_object(own_batch(request, batch_id)))


@door("POST")
def batch_cancel(request: HttpRequest, batch_id: str) -> HttpResponse:
    batch = own_batch(request, batch_id)
    batches.cancel_remaining(batch)
    return JsonResponse(batch_object(batch))
