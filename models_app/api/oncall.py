"""/api/models/<name>/on-call/: a model's on-call settings, its state and its load records, for lab admins, through
the same checks as the model's page (models_app/oncall/service.py)."""

from datetime import datetime

from django.http import HttpRequest
from ninja import Field, Router, Schema

from clusterpanel.kit.apikit import ApiError, Input, errors
from models_app.api.library import named
from models_app.models import GgufModel, OnCall, WhenShort
from models_app.oncall import service as oncall
from nodes.models import Node

router = Router()
EVENTS_SHOWN = 50


class OnCallIn(Input):
    pool: list[str] | None = Field(None, description="Laptop names; null: any ready laptop.")
    idle_minutes: int = Field(15, description="Minutes without a job before its deployment is unloaded (1 or more).")
    replicas: int = Field(1, description="Deployments loaded side by side on separate laptops when it wakes.")
    ctx: int = Field(2048, description="The most each person's conversation may hold (tokens).")
    slots: int = Field(1, description="People each deployment serves at once.")
    when_short: str = Field(WhenShort.WAIT, description=(
        "When its pool's free laptops cannot hold it: \"wait\" for an idle deployment to be unloaded, or \"evict\" "
        "the least recently used idle on-call deployment. One with jobs is never stopped."))
    draft_tokens: int = Field(0, description="Speculative decoding: the most tokens an answer drafts a step (0: off).")
    draft_model: str | None = Field(None, description="A model with the same vocabulary that drafts on the head (its "
                                                      "name); null: n-gram drafting.")


class EventOut(Schema):
    at: datetime
    kind: str = Field(description="load, loaded, failed, wait, unload or evict.")
    why: str
    deployment: int | None


class OnCallOut(Schema):
    model: str
    state: str = Field(description="ready, loading or asleep.")
    pool: list[str] | None = Field(description="Laptop names; null: any ready laptop.")
    idle_minutes: int
    replicas: int
    ctx: int
    slots: int
    when_short: str
    draft_tokens: int
    draft_model: str | None
    events: list[EventOut] = Field(description=f"Its latest {EVENTS_SHOWN} loads and unloads, newest first.")


class OffCall(Schema):
    model: str
    was_on_call: bool
    said: str


def described(on_call: OnCall) -> dict:
    model = on_call.model
    events = model.on_call_events.all()[:EVENTS_SHOWN]
    return {"model": model.name, "state": oncall.state_of(model),
            "pool": None if on_call.any_laptop else [node.name for node in on_call.pool.order_by("name")],
            "idle_minutes": on_call.idle_minutes, "replicas": on_call.replicas, "ctx": on_call.ctx,
            "slots": on_call.slots, "when_short": on_call.when_short, "draft_tokens": on_call.draft_tokens,
            "draft_model": on_call.draft_model.name if on_call.draft_model_id else None,
            "events": [{"at": e.at, "kind": e.kind, "why": e.why, "deployment": e.deployment_id} for e in events]}


def on_call_of(model: GgufModel) -> OnCall:
    found = OnCall.objects.filter(model=model).first()
    if found is None:
        raise ApiError(f"{model.name} is not on call.", 404)
    return found


def pool_from(names: list[str] | None) -> list[Node] | None:
    if names is None:
        return None
    for name in names:
        if not name.isprintable():  # a NUL is PostgreSQL's 500
            raise ApiError(f"{name!r} is not a name the panel gives.", 400, "pool")
    found = {node.name: node for node in Node.objects.filter(name__in=names)}
    missing = [name for name in names if name not in found]
    if missing:
        raise ApiError(f"There is no laptop {missing[0]!r}: the pool names laptops as the Laptops page does.", 400,
                       "pool")
    return [found[name] for name in dict.fromkeys(names)]


@router.get("/{slug:name}/on-call/", response={200: OnCallOut, **errors(403, 404)},
            summary="A model's on-call settings, state and load records")
def get_on_call(request: HttpRequest, name: str):
    return described(on_call_of(named(request, name)))


@router.put("/{slug:name}/on-call/", response={200: OnCallOut, **errors(403, 404)},
            summary="Put a model on call, or change its settings (checked against its pool's memory)")
def put_on_call(request: HttpRequest, name: str, payload: OnCallIn):
    model = named(request, name)
    draft = None
    if payload.draft_model is not None:
        draft = GgufModel.objects.filter(name=payload.draft_model).first()
        if draft is None:
            raise ApiError(f"There is no model named {payload.draft_model!r}.", 400, "draft_model")
    wanted = oncall.Settings(pool_from(payload.pool), payload.idle_minutes, payload.replicas, payload.ctx,
                             payload.slots, payload.when_short, payload.draft_tokens, draft)
    try:
        return described(oncall.save(model, wanted))
    except oncall.OnCallError as exc:
        raise ApiError(str(exc), 400, exc.field) from None


@router.delete("/{slug:name}/on-call/", response={200: OffCall, **errors(403, 404)},
               summary="Take a model off call (what is loaded stays until stopped)")
def delete_on_call(request: HttpRequest, name: str):
    model = named(request, name)
    was = oncall.take_off(model)
    said = (f"{model.name} is off call: requests no longer wake it. Its deployments loaded now stay until stopped."
            if was else f"{model.name} was not on call.")
    return {"model": model.name, "was_on_call": was, "said": said}
