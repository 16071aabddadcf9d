"""The upload protocol over HTTP (see models_app/uploads.py and static/js/upload.js).

POST uploads/ {name, size, modified, model_name} starts one (201) or finds the same file's unfinished one
(200); GET uploads/<id>/ says how many bytes arrived; PATCH uploads/<id>/ with `Upload-Offset` appends a
chunk (409 with the current offset if it does not start there); DELETE uploads/<id>/ cancels.
"""

import json
import re

from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, JsonResponse
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from clusterpanel.auth import lab_admin_required
from models_app import uploads
from models_app.models import Upload

STATUS = {uploads.UploadGone: 404, uploads.WrongOffset: 409, uploads.ChunkRefused: 413}
BIGGEST = (1 << 63) - 1  # what the database's 64-bit columns hold
DIGITS = re.compile(r"[+-]?[0-9]{1,19}")


@lab_admin_required
@require_POST
def start_upload(request: HttpRequest) -> JsonResponse:
    try:
        fields = json.loads(request.body)
        name, size = str(fields["name"]), whole(fields["size"], 0, BIGGEST)
        modified = whole(fields.get("modified", 0), -BIGGEST, BIGGEST)
    except (ValueError, KeyError, TypeError, RecursionError):  # RecursionError: JSON nested thousands deep
        return JsonResponse({"error": "Send JSON with the file's name, its size in bytes and its modification "
                                      "time in milliseconds, as whole numbers."}, status=400)
    try:
        upload, resumed = uploads.start(request.user, name, size, modified, str(fields.get("model_name") or ""))
    except uploads.UploadError as exc:
        return refused(exc)
    return JsonResponse(described(uploads.progress(upload.pk)), status=200 if resumed else 201)


@lab_admin_required
@require_http_methods(["GET", "PATCH", "DELETE"])
def upload(request: HttpRequest, pk) -> JsonResponse:
    if not Upload.objects.filter(pk=pk, owner=request.user).exists():
        return refused(uploads.UploadGone())
    try:
        if request.method == "GET":
            return JsonResponse(described(uploads.progress(pk)))
        if request.method == "DELETE":
            uploads.cancel(pk)
            return JsonResponse({"cancelled": True})
        return append(request, pk)
    except uploads.UploadError as exc:
        return refused(exc)


def append(request: HttpRequest, pk) -> JsonResponse:
    try:
        offset = whole(request.headers["Upload-Offset"], 0, BIGGEST)
        length = whole(request.headers["Content-Length"], 0, BIGGEST)
    except (KeyError, ValueError):
        return JsonResponse({"error": "Send the chunk with Upload-Offset and Content-Length headers."}, status=400)
    # The body is read in pieces from the request stream, never as request.body: a chunk is megabytes.
    model = uploads.append(pk, offset, request, length)
    if model is None:
        return JsonResponse({"offset": offset + length})
    messages.success(request, f"{model.name} uploaded and added; its checksum is being computed.")
    return JsonResponse({"offset": offset + length, "model": model.name,
                         "url": reverse("models:detail", args=[model.name])}, status=201)


def whole(value, low: int, high: int) -> int:
    """A whole number from low to high, given as one, as a float with nothing after the point, or in ASCII
    digits; ValueError otherwise. int() alone raises OverflowError on 1e400, and takes numbers the database
    cannot hold."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    elif isinstance(value, str) and DIGITS.fullmatch(value.strip()):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"not a whole number from {low} to {high}")
    return value


def described(upload: Upload) -> dict:
    return {"id": str(upload.pk), "url": reverse("models:upload", args=[upload.pk]), "name": upload.name,
            "model_name": upload.model_name, "size": upload.size, "offset": upload.received,
            "chunk": settings.UPLOAD_CHUNK_BYTES}


def refused(exc: uploads.UploadError) -> JsonResponse:
    answer = {"error": str(exc)}
    if isinstance(exc, uploads.WrongOffset):
        answer["offset"] = exc.offset
    return JsonResponse(answer, status=STATUS.get(type(exc), 422))
