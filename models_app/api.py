"""/api/models/ and /api/plans/: the model library and the planner, for lab admins, through the same services
and forms as the Models and Plan pages. Deployments: models_app/api_deployments.py."""

from datetime import datetime
from typing import Any, Literal

from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from ninja import Field, Query, Router, Schema, Status

from clusterpanel.apikit import DEFAULT_LIMIT, MAX_LIMIT, ApiError, Input, Page, admin_only, errors, form_refusal, paged
from models_app import oncall, removal
from models_app.library import LibraryError, register_path
from models_app.models import GgufModel, OnCall
from models_app.plan_views import PlanForm, plans_for
from models_app.planning import left_out_words, people_at_once
from nodes.models import Node

models = Router()
plans = Router()


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


class PlanIn(Input):
    model: str = Field(description="The model's name.")
    nodes: list[str] = Field([], description="Laptop names, in pipeline order; none: every ready laptop.")
    ctx: int = Field(2048, description="The most each person's conversation may hold (tokens).")
    slots: int | None = Field(None, description="People served at once; none: the most of 8, 4, 2, 1 that fit.")
    head_layers: bool = Field(False, description="The panel's machine may hold layers too.")
    mode: Literal["fastest", "memory", "even"] = "fastest"
    preseed: bool = Field(True, description="Copy each laptop's weights first, so a redeploy copies nothing.")
    order: list[str] = Field([], description="Laptop names first to last; those not named follow.")


class PlanOut(Schema):
    chosen: str
    nodes: list[str]
    people_at_once: str | None
    left_out: list[str] = Field(description="Ready laptops left out: more than one model can span were offered.")
    left_out_said: str = Field(description="Why, in words; empty when none is left out.")
    modes: dict[str, dict[str, Any]] = Field(description=(
        "Each mode's plan as the Plan page shows it (stages with layers and predicted memory, tokens/s, "
        "bottleneck, n_gpu_layers, tensor_split, slots), or {\"error\": why it does not fit}."))


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


@models.get("/", response={200: Page[ModelOut], **errors(403)}, summary="The model library, by name")
def list_models(request: HttpRequest, limit: int = Query(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT),
                offset: int = Query(0, ge=0, le=2**31)):
    admin_only(request, "see the model library")
    return paged(request, GgufModel.objects.order_by("name"), model_row, limit, offset)


@models.post("/", response={201: ModelDetail, **errors(403)}, summary="Register a GGUF file on the panel's machine")
def register_model(request: HttpRequest, payload: RegisterIn):
    admin_only(request, "add models")
    try:
        model = register_path(payload.path, payload.name)
    except LibraryError as exc:
        raise ApiError(str(exc), 400, "path") from None
    return Status(201, model_detail(model))


@models.get("/{slug:name}/", response={200: ModelDetail, **errors(403, 404)},
            summary="A model: shape, layers, checksum")
def get_model(request: HttpRequest, name: str):
    return model_detail(named(request, name))


@models.patch("/{slug:name}/", response={200: ModelDetail, **errors(403, 404)}, summary="Rename a model")
def rename(request: HttpRequest, name: str, payload: RenameIn):
    model = named(request, name)
    try:
        removal.rename_model(model, payload.name)
    except removal.Refused as exc:
        raise ApiError(str(exc), 400, "name") from None
    return model_detail(model)


@models.delete("/{slug:name}/", response={200: Deletion, **errors(403, 404, 409)},
               summary="Delete a model (refused while deployed); says what it freed")
def delete(request: HttpRequest, name: str):
    model = named(request, name)
    try:
        said = removal.model_deletion(model)
        removal.delete_model(model)
    except removal.Refused as exc:
        raise ApiError(str(exc), 409) from None
    return {"deleted": name, "consequences": said}


def plan_form(payload: PlanIn) -> PlanForm:
    """The Plan page's own form, from names: the same checks, the same words."""
    for field, names in (("model", [payload.model]), ("nodes", payload.nodes), ("order", payload.order)):
        for name in names:
            if not name.isprintable():  # a NUL is PostgreSQL's 500
                raise ApiError(f"{name!r} is not a name the panel gives.", 400, field)
    model = GgufModel.objects.filter(name=payload.model).first()
    if model is None:
        raise ApiError(f"There is no model {payload.model!r}.", 404, "model")
    found = {node.name: node.pk for node in Node.objects.filter(name__in=payload.nodes)}
    missing = [name for name in payload.nodes if name not in found]
    if missing:
        raise ApiError(f"There is no laptop {missing[0]!r}.", 404, "nodes")
    form = PlanForm({"model": model.pk, "nodes": [found[name] for name in payload.nodes], "ctx": payload.ctx,
                     "slots": "" if payload.slots is None else payload.slots, "head_layers": payload.head_layers,
                     "mode": payload.mode, "preseed": payload.preseed, "order": ", ".join(payload.order)})
    if not form.is_valid():
        raise form_refusal(form)
    return form


@plans.post("/", response={200: PlanOut, **errors(403, 404)}, summary="Plan a model over laptops: every mode")
def plan(request: HttpRequest, payload: PlanIn):
    admin_only(request, "plan deployments")
    form = plan_form(payload)
    data, nodes = form.cleaned_data, form.chosen_nodes()
    results = plans_for(data, nodes)
    chosen = results[data["mode"]]
    return {"chosen": data["mode"], "nodes": [node.name for node in nodes], "modes": results,
            "people_at_once": None if "error" in chosen else people_at_once(chosen),
            "left_out": [node.name for node in form.left_out], "left_out_said": left_out_words(form.left_out)}

