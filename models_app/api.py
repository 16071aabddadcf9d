"""/api/deployments/: the deployments, with their plans in short."""

from django.http import HttpRequest
from ninja import Query, Router, Schema

from clusterpanel.apikit import DEFAULT_LIMIT, MAX_LIMIT, Page, errors, paged
from models_app.models import Deployment

router = Router()


class StageOut(Schema):
    machine: str
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
    model_ids: list[str]
    status: str
    ctx: int
    slots: int
    is_default: bool
    created: str
    plan: PlanShort


def deployment_summary(deployment: Deployment) -> dict:
    plan = deployment.plan or {}
    return {"id": deployment.pk, "model": deployment.model.name, "model_ids": deployment.model_ids,
            "status": deployment.status, "ctx": deployment.ctx, "slots": deployment.slots,
            "is_default": deployment.is_default, "created": deployment.created.isoformat(),
            "plan": {"mode": plan.get("mode"), "tokens_per_second": plan.get("tokens_per_second"),
                     "bottleneck": plan.get("bottleneck"),
                     "stages": [{"machine": s["machine"], "first_layer": s["first"], "layers": s["count"]}
                                for s in plan.get("stages", [])]}}


@router.get("/", response={200: Page[DeploymentOut], **errors()}, summary="List deployments, the default first")
def list_deployments(request: HttpRequest, limit: int = Query(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT),
                     offset: int = Query(0, ge=0, le=2**31)):
    listed = Deployment.objects.select_related("model").order_by("-is_default", "-created")
    return paged(request, listed, deployment_summary, limit, offset)
