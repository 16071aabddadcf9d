"""/api/deployments/: every user reads the deployments; lab admins create one from a plan, follow it live until
its engine is ready, verify it, make it the chat's default, stop, re-plan, redeploy and remove it — through the
services the deployment page uses (models_app/deploying/deploy.py, removal.py)."""

from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from ninja import Field, Query, Router, Schema, Status

from clusterpanel.accounts.apiauth import admin_only
from clusterpanel.kit.apikit import (
    ApiError,
    Input,
    Page,
    Paging,
    described_as_events,
    errors,
    event_stream,
    existing,
    follow,
    paged,
)
from models_app.api.plans import PlanIn, plan_form
from models_app.deploying import deploy, jobs_above
from models_app.library import removal
from models_app.models import MAX_DRAFT_TOKENS, Deployment, DeploymentStatus, GgufModel
from models_app.planning.records import PlanningError
from models_app.tasks import prepare_soon

router = Router()
SETTLED = (DeploymentStatus.FAILED, DeploymentStatus.STOPPED)
# Everyone lists the deployments (which model, ready or not); their laptops, rpc-server endpoints (a direct
# rpc-server has no authentication), plan and engine are for lab admins, as the deployment page is.
ADMIN_READS = "see a deployment's laptops and servers"


class StageOut(Schema):
    machine: str = Field(description="The laptop, or \"head\"; a laptop with several devices in the plan comes "
                                     "once per device.")
    device: str = Field("CPU", description="The laptop's device holding these layers, as ggml names it.")
    first_layer: int
    layers: int


class PlanShort(Schema):
    mode: str | None
    tokens_per_second: float | None
    bottleneck: str | None
    stages: list[StageOut]


class DeploymentOut(Schema):
    id: int
    model: str
    model_ids: list[str] = Field(description="The names /v1/ knows it by.")
    status: str
    ctx: int
    slots: int
    draft_tokens: int = Field(description="Speculative decoding: the most tokens an answer drafts per step "
                                          "(0: off).")
    draft_model: str | None = Field(description="The model that drafts on the head; null: n-gram drafting.")
    is_default: bool
    created: str
    plan: PlanShort


class LaptopStage(Schema):
    position: int
    laptop: str
    first_layer: int
    layers: int
    server: str | None = Field(description="The rpc-server's state.")
    endpoint: str | None
    preseed: dict[str, Any] | None = Field(description="Copying its weights ahead: bytes done and total.")


class DeploymentDetail(DeploymentOut):
    status_detail: str
    mode: str
    preseed: bool
    engine: dict[str, Any] = Field(description="The engine: loading (progress 0–1), ready, or failed; its slots.")
    verification: dict[str, Any] = Field(description="The last Verify: identical or different, and where.")
    stages: list[LaptopStage]
    plan_full: dict[str, Any] = Field(description="The whole plan, as the deployment page draws it.")
    url: str
    events: str


class DraftingIn(Input):
    draft_tokens: int = Field(description=f"0 (no drafting) to {MAX_DRAFT_TOKENS}.")
    draft_model: str | None = Field(None, description="A model with the same vocabulary that drafts on the head "
                                                      "(its name); null: n-gram drafting; left out: as it is.")


class Stopped(Schema):
    id: int
    status: str
    consequences: list[str]


def deployment_summary(deployment: Deployment) -> dict:
    plan = deployment.plan or {}
    return {"id": deployment.pk, "model": deployment.model.name, "model_ids": deployment.model_ids,
            "status": deployment.status, "ctx": deployment.ctx, "slots": deployment.slots,
            "draft_tokens": deployment.draft_tokens, "is_default": deployment.is_default,
            "draft_model": deployment.draft_model.name if deployment.draft_model_id else None,
            "created": deployment.created.isoformat(),
            "plan": {"mode": plan.get("mode"), "tokens_per_second": plan.get("tokens_per_second"),
                     "bottleneck": plan.get("bottleneck"),
                     "stages": [{"machine": s["machine"], "device": s.get("device", "CPU"), "first_layer": s["first"],
                                 "layers": s["count"]} for s in plan.get("stages", [])]}}


def deployment_detail(deployment: Deployment) -> dict:
    stages = deployment.stages.select_related("node", "server", "server__node").order_by("position")
    return {**deployment_summary(deployment), "status_detail": deployment.status_detail, "mode": deployment.mode,
            "preseed": deployment.preseed, "verification": deployment.verification, "plan_full": deployment.plan,
            "engine": deployment.engine if deployment.is_active else {},
            "stages": [{"position": s.position, "laptop": s.node.name, "first_layer": s.first_layer,
                        "layers": s.layer_count, "server": s.server.status if s.server else None,
                        "endpoint": s.server.endpoint if s.server else None, "preseed": s.preseed or None}
                       for s in stages],
            "url": f"/api/deployments/{deployment.pk}/", "events": f"/api/deployments/{deployment.pk}/events/"}


def deployment_of(request: HttpRequest, pk: int, admin: str | None = None) -> Deployment:
    if admin:
        admin_only(request, admin)
    return get_object_or_404(Deployment.objects.select_related("model"), pk=existing(pk, "deployment"))


@router.get("/", response={200: Page[DeploymentOut], **errors()}, summary="List deployments, the default first")
def list_deployments(request: HttpRequest, paging: Query[Paging]):
    listed = Deployment.objects.select_related("model").order_by("-is_default", "-created")
    return paged(request, listed, deployment_summary, paging)


@router.post("/", response={202: DeploymentDetail, **errors(403, 404, 409)},
             summary="Deploy a model as planned; follow it at `events`")
def create(request: HttpRequest, payload: PlanIn):
    user = admin_only(request, "deploy models")
    form = plan_form(payload)
    data = form.cleaned_data
    try:
        deployment = deploy.create(data["model"], form.chosen_nodes(), data["ctx"], data["mode"], user=user,
                                   head_layers=data["head_layers"], preseed=data["preseed"], slots=data["slots"])
    except PlanningError as exc:
        raise ApiError(f"Nothing was started: {exc}", 409) from None
    prepare_soon(deployment)
    return Status(202, deployment_detail(deployment))


@router.get("/{int:pk}/", response={200: DeploymentDetail, **errors(403, 404)},
            summary="A deployment in full (its laptops, rpc-servers, plan, engine)")
def get_deployment(request: HttpRequest, pk: int):
    return deployment_detail(deployment_of(request, pk, ADMIN_READS))


def usable_or_settled(state: dict) -> bool:
    return state["status"] in SETTLED or (state["status"] in (DeploymentStatus.READY, DeploymentStatus.DEGRADED)
                                          and state["engine"].get("state") in ("ready", "failed"))


@router.get("/{int:pk}/events/", response=errors(403, 404), openapi_extra=described_as_events(DeploymentDetail),
            summary="Follow a deployment live until its engine is ready, or it failed or stopped")
async def follow_deployment(request: HttpRequest, pk: int):
    deployment = await sync_to_async(deployment_of)(request, pk, ADMIN_READS)

    def snapshot() -> dict | None:
        found = Deployment.objects.select_related("model").filter(pk=deployment.pk).first()
        return deployment_detail(found) if found else None

    return event_stream(follow(snapshot, usable_or_settled))


class VerificationOut(Schema):
    id: int
    verification: dict[str, Any] = Field(description="result: running, identical, different, no reference or failed.")


@router.get("/{int:pk}/verification/events/", response=errors(403, 404),
            openapi_extra=described_as_events(VerificationOut),
            summary="Follow a verification live until it has a result")
async def follow_verification(request: HttpRequest, pk: int):
    deployment = await sync_to_async(deployment_of)(request, pk, ADMIN_READS)

    def snapshot() -> dict | None:
        found = Deployment.objects.filter(pk=deployment.pk).values_list("verification", flat=True).first()
        return None if found is None else {"id": deployment.pk, "verification": found}

    return event_stream(follow(snapshot, lambda state: state["verification"].get("result") != "running"))


@router.get("/{int:pk}/verification/", response={200: VerificationOut, **errors(403, 404)},
            summary="The last verification's result")
def verification(request: HttpRequest, pk: int):
    deployment = deployment_of(request, pk, ADMIN_READS)
    return {"id": deployment.pk, "verification": deployment.verification}


@router.post("/{int:pk}/stop/", response={200: Stopped, **errors(403, 404, 409)}, summary="Stop a deployment")
def stop(request: HttpRequest, pk: int):
    deployment = deployment_of(request, pk, "stop deployments")
    try:
        said = removal.stopping(deployment)
    except removal.Refused as exc:
        raise ApiError(str(exc), 409) from None
    deploy.stop(deployment)
    return {"id": pk, "status": DeploymentStatus.STOPPED, "consequences": said}


@router.post("/{int:pk}/verify/", response={202: VerificationOut, **errors(403, 404, 409, 503)},
             summary="Verify: the same prompt here and on the head alone, compared token by token; follow it at "
                     "verification/events/")
def verify(request: HttpRequest, pk: int):
    deployment = deployment_of(request, pk, "verify deployments")
    try:
        jobs_above.verify(deployment, request.auth)
    except jobs_above.NotVerifiable as exc:
        raise ApiError(str(exc), exc.status) from None
    return Status(202, {"id": pk, "verification": Deployment.objects.get(pk=pk).verification})


@router.post("/{int:pk}/default/", response={200: DeploymentDetail, **errors(403, 404, 409)},
             summary="Make it the one the chat page and /v1/ offer first (it must take jobs)")
def make_default(request: HttpRequest, pk: int):
    deployment = deployment_of(request, pk, "choose the default deployment")
    try:
        deploy.make_default(deployment)
    except PlanningError as exc:
        raise ApiError(str(exc), 409) from None
    return deployment_detail(deployment)


@router.post("/{int:pk}/again/", response={202: DeploymentDetail, **errors(403, 404, 409)},
             summary="Redeploy it as it was, or re-plan it on its laptops that are ready (stops it first)")
def again(request: HttpRequest, pk: int,
          ready_only: bool = Query(False, description="Re-plan on its ready laptops instead.")):
    deployment = deployment_of(request, pk, "redeploy")
    try:
        fresh = deploy.again(deployment, ready_only, request.auth)
    except PlanningError as exc:
        raise ApiError(f"Nothing was started: {exc}", 409) from None
    prepare_soon(fresh)
    fresh.refresh_from_db()  # the chat's default may have passed to it
    return Status(202, deployment_detail(fresh))


@router.post("/{int:pk}/drafting/", response={200: DeploymentDetail, **errors(400, 403, 404)},
             summary="Turn speculative decoding on (the most tokens drafted a step; by n-grams or a draft model) "
                     "or off (0)")
def drafting(request: HttpRequest, pk: int, payload: DraftingIn):
    deployment = deployment_of(request, pk, "change a deployment's drafting")
    draft = "unchanged"
    if "draft_model" in payload.model_fields_set and payload.draft_model is not None:
        draft = GgufModel.objects.filter(name=payload.draft_model).first()
        if draft is None:
            raise ApiError(f"There is no model named {payload.draft_model!r}.", 400, "draft_model")
    elif "draft_model" in payload.model_fields_set:
        draft = None
    try:
        deploy.set_drafting(deployment, payload.draft_tokens, draft)
    except deploy.DraftRefused as exc:
        raise ApiError(str(exc), 400, "draft_model") from None
    except PlanningError as exc:
        raise ApiError(str(exc), 400, "draft_tokens") from None
    return deployment_detail(deployment)


@router.delete("/{int:pk}/", response={204: None, **errors(403, 404, 409)}, summary="Remove a stopped or failed one")
def remove(request: HttpRequest, pk: int):
    deployment = deployment_of(request, pk, "remove deployments")
    try:
        removal.deployment_removal(deployment)
        removal.remove_deployment(deployment)
    except removal.Refused as exc:
        raise ApiError(str(exc), 409) from None
    return Status(204, None)
