"""/api/models/: the model library, for lab admins, through the same services and forms as the Models pages.
Plans: models_app/api/plans.py; deployments: models_app/api/deployments.py."""

from datetime import datetime

from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from ninja import Field, Query, Router, Schema, Status

from clusterpanel.accounts.apiauth import admin_only
from clusterpanel.kit.apikit import ApiError, Input, Page, Paging, errors, paged
from models_app.library import removal
from models_app.library.adding import LibraryError, register_path
from models_app.models import GgufModel, OnCall
from models_app.oncall import service as oncall

router = Router()


class ModelOut(Schema):
    name: str
    title: str
    path: str
    size: int
    status: str
    status_detail: str
    sha256: str
    checksum_progress: float = Field(description="0 to 1 while the checksum is computed.")
    bundled: bool
    architecture: str
    layers: int
    embedding: int
    heads: int
    kv_heads: int
    feed_forward: int
    context_length: int
    vocab_size: int
    file_type: str
    quantization: str = Field(description="The file type in words: what a weight is, and its bits.")
    created: datetime
    deployments: list[int] = Field(description="Its deployments that hold laptops now.")
    on_call: bool = Field(description="Loaded when a request names it, unloaded when idle (see on-call/).")
    state: str = Field(description="ready, loading, asleep (on call, nothing loaded), or empty: not deployed.")


class ModelDetail(ModelOut):
    layer_bytes: list[int] = Field(description="Bytes of each transformer layer's weights, first to last.")
    other_bytes: dict[str, int] = Field(description="Bytes of the tensors outside the layers, by kind.")


class RegisterIn(Input):
    path: str = Field(description="A GGUF file on the panel's machine.")
    name: str = Field("", description="Empty: from the file's name.")


class RenameIn(Input):
    name: str


class Deletion(Schema):
    deleted: str
    consequences: list[str]


def model_row(model: GgufModel) -> dict:
    return {"name": model.name, "title": model.title, "path": model.path, "size": model.size,
            "status": model.status, "status_detail": model.status_detail, "sha256": model.sha256,
            "checksum_progress": model.hash_progress, "bundled": model.bundled, "architecture": model.architecture,
            "layers": model.n_layer, "embedding": model.n_embd, "heads": model.n_head, "kv_heads": model.n_head_kv,
            "feed_forward": model.n_ff, "context_length": model.context_length, "vocab_size": model.vocab_size,
            "file_type": model.file_type, "quantization": model.quantization, "created": model.created,
            "deployments": list(model.deployments.filter(status__in=model.deployments.model.ACTIVE)
                                .values_list("pk", flat=True)),
            "on_call": OnCall.objects.filter(model=model).exists(), "state": oncall.state_of(model)}


def model_detail(model: GgufModel) -> dict:
    return {**model_row(model), "layer_bytes": model.layer_bytes,
            "other_bytes": {kind: int(size) for kind, size in (model.other_tensors or {}).items()}}


def named(request: HttpRequest, name: str) -> GgufModel:
    admin_only(request, "manage models")
    return get_object_or_404(GgufModel, name=name)


@router.get("/", response={200: Page[ModelOut], **errors(403)}, summary="The model library, by name")
def list_models(request: HttpRequest, paging: Query[Paging]):
    admin_only(request, "see the model library")
    return paged(request, GgufModel.objects.order_by("name"), model_row, paging)


@router.post("/", response={201: ModelDetail, **errors(403)}, summary="Register a GGUF file on the panel's machine")
def register_model(request: HttpRequest, payload: RegisterIn):
    admin_only(request, "add models")
    try:
        model = register_path(payload.path, payload.name)
    except LibraryError as exc:
        raise ApiError(str(exc), 400, "path") from None
    return Status(201, model_detail(model))


@router.get("/{slug:name}/", response={200: ModelDetail, **errors(403, 404)},
            summary="A model: shape, layers, checksum")
def get_model(request: HttpRequest, name: str):
    return model_detail(named(request, name))


@router.patch("/{slug:name}/", response={200: ModelDetail, **errors(403, 404)}, summary="Rename a model")
def rename(request: HttpRequest, name: str, payload: RenameIn):
    model = named(request, name)
    try:
        removal.rename_model(model, payload.name)
    except removal.Refused as exc:
        raise ApiError(str(exc), 400, "name") from None
    return model_detail(model)


@router.delete("/{slug:name}/", response={200: Deletion, **errors(403, 404, 409)},
               summary="Delete a model (refused while deployed); says what it freed")
def delete(request: HttpRequest, name: str):
    model = named(request, name)
    try:
        said = removal.model_deletion(model)
        removal.delete_model(model)
    except removal.Refused as exc:
        raise ApiError(str(exc), 409) from None
    return {"deleted": name, "consequences": said}
