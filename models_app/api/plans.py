"""/api/plans/: every mode's plan of a model over laptops, as the Plan page makes it."""

from typing import Any, Literal

from django.http import HttpRequest
from ninja import Field, Router, Schema

from clusterpanel.accounts.apiauth import admin_only
from clusterpanel.kit.apikit import ApiError, Input, errors, form_refusal
from models_app.models import GgufModel
from models_app.pages.plan_views import PlanForm, plans_for
from models_app.planning.records import left_out_words, people_at_once
from nodes.models import Node

router = Router()


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


@router.post("/", response={200: PlanOut, **errors(403, 404)}, summary="Plan a model over laptops: every mode")
def plan(request: HttpRequest, payload: PlanIn):
    admin_only(request, "plan deployments")
    form = plan_form(payload)
    data, nodes = form.cleaned_data, form.chosen_nodes()
    results = plans_for(data, nodes)
    chosen = results[data["mode"]]
    return {"chosen": data["mode"], "nodes": [node.name for node in nodes], "modes": results,
            "people_at_once": None if "error" in chosen else people_at_once(chosen),
            "left_out": [node.name for node in form.left_out], "left_out_said": left_out_words(form.left_out)}

