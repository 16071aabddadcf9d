"""/api/uploads/: a GGUF file sent in chunks, each with the offset it starts at, for lab admins. The Models
page's uploader (static/js/upload.js) speaks it too; the work is models_app/library/uploads.py.

POST starts an upload (201) or finds the caller's unfinished one of the same file — name, size and date —
(200); GET says how many bytes arrived; PATCH with `Upload-Offset` appends a chunk (409 with the offset the
panel has if it does not start there); DELETE cancels. The last chunk registers the model.
"""

import re
from uuid import UUID

from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest
from django.urls import reverse
from ninja import Field, Header, Query, Router, Schema, Status

from clusterpanel.accounts.apiauth import admin_only
from clusterpanel.kit.apikit import ApiError, Error, Input, Page, Paging, errors, paged
from models_app.library import uploads
from models_app.models import Upload

router = Router()

BIGGEST = (1 << 63) - 1  # what the database's 64-bit columns hold
DIGITS = re.compile(r"[0-9]{1,19}")
STATUS = {uploads.UploadGone: 404, uploads.ChunkRefused: 413}


class UploadIn(Input):
    name: str = Field(max_length=4096, description="The file's name, shown while it uploads.")
    size: int = Field(ge=0, le=BIGGEST, description="The whole file's size in bytes.")
    modified: int = Field(0, ge=-BIGGEST, le=BIGGEST, description=(
        "The file's modification time in milliseconds: with name and size, what finds an unfinished upload "
        "of the same file."))
    model_name: str = Field("", max_length=4096, description="The model's name once registered; empty: from "
                                                             "the file's name.")


class UploadOut(Schema):
    id: UUID
    url: str = Field(description="Where its chunks go (PATCH), its progress is read (GET) and it is cancelled.")
    name: str
    model_name: str
    size: int
    offset: int = Field(description="Bytes the panel has: the next chunk starts here.")
    chunk: int = Field(description="The most bytes one chunk may hold.")


class ChunkOut(Schema):
    offset: int = Field(description="Bytes the panel has: the next chunk starts here.")


class ModelAdded(ChunkOut):
    model: str = Field(description="The model the last chunk registered (/api/models/<model>/).")
    url: str = Field(description="The model's page.")


class ElsewhereError(Error):
    offset: int = Field(description="Bytes the panel has: send the chunk that starts here.")


class Cancelled(Schema):
    cancelled: bool


def described(upload: Upload) -> dict:
    return {"id": upload.pk, "url": reverse("api:upload", args=[upload.pk]), "name": upload.name,
            "model_name": upload.model_name, "size": upload.size, "offset": upload.received,
            "chunk": settings.UPLOAD_CHUNK_BYTES}


def refusal(exc: uploads.UploadError) -> ApiError:
    return ApiError(str(exc), STATUS.get(type(exc), 422), exc.field)


def own(request: HttpRequest, pk: UUID) -> UUID:
    user = admin_only(request, "upload models")
    if not Upload.objects.filter(pk=pk, owner=user).exists():
        raise refusal(uploads.UploadGone())
    return pk


@router.get("/", response={200: Page[UploadOut], **errors(403)}, url_name="uploads",
            summary="Your unfinished uploads, oldest first")
def list_uploads(request: HttpRequest, paging: Query[Paging]):
    user = admin_only(request, "upload models")
    return paged(request, Upload.objects.filter(owner=user).order_by("created", "pk"), described, paging)


@router.post("/", response={200: UploadOut, 201: UploadOut, **errors(403, 422)},
             summary="Start an upload, or find the unfinished one of the same file")
def start_upload(request: HttpRequest, payload: UploadIn):
    user = admin_only(request, "upload models")
    try:
        upload, resumed = uploads.start(user, payload.name, payload.size, payload.modified, payload.model_name)
    except uploads.UploadError as exc:
        raise refusal(exc) from None
    return Status(200 if resumed else 201, described(uploads.progress(upload.pk)))


@router.get("/{uuid:pk}/", response={200: UploadOut, **errors(403, 404)}, url_name="upload",
            summary="How much of an upload arrived")
def upload_progress(request: HttpRequest, pk: UUID):
    try:
        return described(uploads.progress(own(request, pk)))
    except uploads.UploadError as exc:
        raise refusal(exc) from None


@router.patch("/{uuid:pk}/", response={200: ChunkOut, 201: ModelAdded, 409: ElsewhereError,
                                       **errors(403, 404, 413, 422)},
              summary="Append a chunk (the request's body, application/octet-stream)", openapi_extra={
                  "requestBody": {"required": True, "description": "The chunk's bytes: at most `chunk` of them, "
                                  "starting at `Upload-Offset`; the last one may be shorter.",
                                  "content": {"application/octet-stream": {
                                      "schema": {"type": "string", "contentMediaType": "application/octet-stream"}}}}})
def append_chunk(request: HttpRequest, pk: UUID,
                 upload_offset: str = Header(..., alias="Upload-Offset", pattern=r"^[0-9]{1,19}$",
                                             description="Where the chunk starts: the offset the panel has.")):
    own(request, pk)
    offset = whole(upload_offset, "Upload-Offset")
    length = whole(request.headers.get("Content-Length", ""), "Content-Length")
    try:
        model = uploads.append(pk, offset, request, length)  # read in pieces from the stream: a chunk is megabytes
    except uploads.WrongOffset as exc:
        return Status(409, {"error": str(exc), "field": "Upload-Offset", "offset": exc.offset})
    except uploads.UploadError as exc:
        raise refusal(exc) from None
    if model is None:
        return {"offset": offset + length}
    if request.api_token is None:  # the page goes to the model next and says so there
        messages.success(request, f"{model.name} uploaded and added; its checksum is being computed.")
    return Status(201, {"offset": offset + length, "model": model.name,
                        "url": reverse("models:detail", args=[model.name])})


@router.delete("/{uuid:pk}/", response={200: Cancelled, **errors(403, 404)}, summary="Cancel an upload")
def cancel_upload(request: HttpRequest, pk: UUID):
    try:
        uploads.cancel(own(request, pk))
    except uploads.UploadError as exc:
        raise refusal(exc) from None
    return {"cancelled": True}


def whole(value: str, header: str) -> int:
    """A header's whole number of bytes, in ASCII digits, that the database can hold."""
    if not DIGITS.fullmatch(value) or int(value) > BIGGEST:
        raise ApiError(f"Send the chunk with the {header} header: a whole number of bytes.", 400, header)
    return int(value)
