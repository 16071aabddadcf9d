"""On-call models: loaded when a request names one, unloaded when idle.

A lab admin puts a model on call with a pool of laptops (chosen ones, or every ready laptop), an idle time, how
many replicas, a context and slots, and what to do when laptops are short: wait for an idle deployment to be
unloaded, or evict the least recently used idle one. This module keeps those settings, checked against today's
planner on the pool's measured memory (as if nothing else were loaded) so that nothing is saved that could never
load; tells each model's state; plans a deployment onto given laptops; and records every load and unload. What
acts on requests and on idle time is jobs/queue/wakeup.py: it has to know about jobs, which this app does not.
"""

import logging
from dataclasses import dataclass

from django.db import transaction
from django.template.defaultfilters import pluralize

from clusterpanel.kit.natural import natural_sorted
from models_app.deploying import drafts
from models_app.deploying.deploy import record_stages
from models_app.models import (
    MAX_DRAFT_TOKENS,
    Deployment,
    DeploymentStatus,
    GgufModel,
    OnCall,
    OnCallEvent,
    WhenShort,
)
from models_app.planning import planner
from models_app.planning.records import PlanningError, as_record, make_plan, read_machines
from nodes.models import Node, NodeStatus
from nodes.runtime import bundle as runtime

log = logging.getLogger(__name__)
ASLEEP, LOADING, READY = "asleep", "loading", "ready"
SERVING = (DeploymentStatus.READY, DeploymentStatus.DEGRADED)
WAKING = (DeploymentStatus.PLANNED, DeploymentStatus.PREPARING, DeploymentStatus.LOADING)
MAX_IDLE_MINUTES = 7 * 24 * 60
MAX_REPLICAS = 16
Machines = dict[str, list[planner.Machine]]  # a laptop's name → its devices as the planner sees them


class OnCallError(ValueError):
    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Settings:
    """What an admin sets; `pool` None: any ready laptop."""
    pool: list[Node] | None
    idle_minutes: int = 15
    replicas: int = 1
    ctx: int = 2048
    slots: int = 1
    when_short: str = WhenShort.WAIT
    draft_tokens: int = 0  # speculative decoding, as a deployment's (deploy.set_drafting)
    draft_model: GgufModel | None = None


def pool_of(on_call: OnCall) -> list[Node]:
    """The ready laptops of its pool, in natural order of their names: names only (a laptop's other fields, its
    private key decrypted among them, are read only for those the planner is asked about)."""
    nodes = Node.objects.filter(status=NodeStatus.READY).only("name", "status")
    if not on_call.any_laptop:
        nodes = nodes.filter(on_call_pools=on_call)
    return natural_sorted(list(nodes), lambda node: node.name)


def whole(value, field: str, low: int, high: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise OnCallError(f"{what} must be a whole number from {low} to {high}, not {value!r}.", field)
    return value


def check(model: GgufModel, wanted: Settings) -> None:
    """Raise OnCallError, in words with the numbers, unless `wanted` can load: an idle time of at least a minute,
    at least one replica, a known policy, and a pool whose measured memory holds every replica."""
    whole(wanted.idle_minutes, "idle_minutes", 1, MAX_IDLE_MINUTES, "The idle time (minutes)")
    whole(wanted.replicas, "replicas", 1, MAX_REPLICAS, "Replicas")
    whole(wanted.ctx, "ctx", 64, max(model.context_length, 64), "The context (tokens)")
    whole(wanted.slots, "slots", 1, 64, "Slots")
    if wanted.when_short not in WhenShort.values:
        raise OnCallError(f"When laptops are short, choose {' or '.join(WhenShort.values)}, not "
                          f"{wanted.when_short!r}.", "when_short")
    whole(wanted.draft_tokens, "draft_tokens", 0, MAX_DRAFT_TOKENS, "Draft tokens")
    if wanted.draft_model is not None and not draft_as_saved(model, wanted):
        why = drafts.refusal(model, wanted.draft_model, wanted.ctx, wanted.slots, copies=wanted.replicas)
        if why:
            raise OnCallError(why, "draft_model")
    if wanted.pool is not None and not wanted.pool:
        raise OnCallError("Choose at least one laptop for its pool, or any ready laptop.", "pool")
    nodes = wanted.pool if wanted.pool is not None else list(Node.objects.filter(status=NodeStatus.READY))
    if not nodes:
        raise OnCallError("No laptop is ready now, so no pool of ready laptops could hold it. Bring a laptop "
                          "back, or choose its pool by hand.", "pool")
    machines = measured(nodes)
    held, why = replicas_fit(model, nodes, machines, wanted, wanted.replicas)
    if held == 0:
        raise OnCallError(f"Its pool is too small for {model.name}: {why}", "pool")
    if held < wanted.replicas:
        raise OnCallError(f"Its pool holds {held} replica{pluralize(held)} of {model.name} at a context of "
                          f"{wanted.ctx} tokens, not {wanted.replicas}: replica {held + 1} would not fit on the "
                          f"laptops left. {why}", "replicas")


def draft_as_saved(model: GgufModel, wanted: Settings) -> bool:
    """The saved settings have this draft for as many sequences: checked then, and maybe loaded on the head now (so
    not counted against the head's free memory twice)."""
    return OnCall.objects.filter(model=model, draft_model=wanted.draft_model, ctx=wanted.ctx, slots=wanted.slots,
                                 replicas__gte=wanted.replicas).exists()


def measured(nodes: list[Node]) -> Machines:
    """Each laptop's devices as if nothing were loaded on it; OnCallError naming one not probed yet."""
    found = read_machines(nodes, empty=True)
    for node, devices in zip(nodes, found, strict=True):
        if devices is None:
            raise OnCallError(f"{node.name} has not been probed yet, so its memory is not known; probe it first.",
                              "pool")
    return {node.name: devices for node, devices in zip(nodes, found, strict=True)}


def replicas_fit(model: GgufModel, nodes: list[Node], machines: Machines, wanted: Settings,
                 most: int) -> tuple[int, str]:
    """How many replicas (up to `most`) fit side by side on `nodes`, each on laptops the others left; and why
    one more does not, in words ("" when `most` fit)."""
    left, count = list(nodes), 0
    while count < most:
        try:
            plan = plan_on(model, left, machines, wanted.ctx, wanted.slots)
        except PlanningError as exc:
            return count, str(exc)
        used = laptops_of(plan)
        left, count = [node for node in left if node.name not in used], count + 1
    return count, ""


def laptops_of(plan: planner.Plan) -> set[str]:
    return {stage.machine.name for stage in plan.stages[1:] if stage.count}


def plan_on(model: GgufModel, nodes: list[Node], machines: Machines, ctx: int, slots: int) -> planner.Plan:
    """Today's planner, fastest mode, the head holding no layers, on the fastest and roomiest of `nodes` (up to
    the laptops one model can span); PlanningError with numbers when it does not fit."""
    if not nodes:
        raise PlanningError("No laptop of its pool is left for it.")
    ranked = sorted(nodes, key=lambda node: (-max((m.bandwidth_gb_s for m in machines[node.name]), default=0),
                                              -sum(m.usable_bytes for m in machines[node.name])))
    chosen = [node for node in nodes if node in ranked[:runtime.MAX_LAPTOPS]]
    return make_plan(model, chosen, ctx, "fastest", slots=slots,
                     machines=[machine for node in chosen for machine in machines[node.name]])


def save(model: GgufModel, wanted: Settings) -> OnCall:
    """Put the model on call with these settings (or change them), all or nothing: OnCallError saves nothing."""
    check(model, wanted)
    with transaction.atomic():
        on_call, _ = OnCall.objects.update_or_create(model=model, defaults={
            "any_laptop": wanted.pool is None, "idle_minutes": wanted.idle_minutes, "replicas": wanted.replicas,
            "ctx": wanted.ctx, "slots": wanted.slots, "when_short": wanted.when_short,
            "draft_tokens": wanted.draft_tokens, "draft_model": wanted.draft_model})
        on_call.pool.set(wanted.pool or [])
    return on_call


def take_off(model: GgufModel) -> bool:
    """Off call: no request wakes it any more. Its deployments loaded now stay until stopped by hand."""
    return bool(OnCall.objects.filter(model=model).delete()[0])


def states(models: list[GgufModel]) -> dict[int, str]:
    """Each model's state, by id, in one query: ready (a deployment takes jobs), loading (one is being prepared,
    loaded, or waits for laptops), asleep (on call, none); "" for a model neither on call nor deployed."""
    rows = Deployment.objects.filter(model__in=models, status__in=(*SERVING, *WAKING)).exclude(
        status=DeploymentStatus.PLANNED, on_call=False).values_list("model_id", "status")
    found: dict[int, set[str]] = {}
    for model_id, status in rows:
        found.setdefault(model_id, set()).add(status)
    on_call = set(OnCall.objects.filter(model__in=models).values_list("model_id", flat=True))
    return {model.pk: state_from(found.get(model.pk, set()), model.pk in on_call) for model in models}


def state_from(statuses: set[str], on_call: bool) -> str:
    if statuses & set(SERVING):
        return READY
    if statuses:
        return LOADING
    return ASLEEP if on_call else ""


def state_of(model: GgufModel) -> str:
    return states([model])[model.pk]


def record(model: GgufModel, deployment: Deployment | None, kind: str, why: str) -> OnCallEvent:
    log.info("%s: %s (%s)", model, kind, why)
    return OnCallEvent.objects.create(model=model, deployment=deployment, kind=kind, why=why)


def waiting_plan(why: str) -> dict:
    """The plan of a deployment that waits for laptops: no stages yet, and why in its notes."""
    return {"mode": "fastest", "stages": [], "n_gpu_layers": 0, "tensor_split": [], "notes": [why],
            "waiting": True}


def waiting_deployment(model: GgufModel, on_call: OnCall, why: str) -> Deployment:
    """A deployment that holds no laptop yet: requests queue on it until the scheduler places it (`place`)."""
    return Deployment.objects.create(model=model, ctx=on_call.ctx, slots=on_call.slots, plan=waiting_plan(why),
                                     draft_tokens=on_call.draft_tokens, draft_model=on_call.draft_model,
                                     status_detail=f"Waiting for laptops: {why}", on_call=True)


def place(deployment: Deployment, plan: planner.Plan, nodes: list[Node]) -> None:
    """A waiting deployment given its plan and stages; still PLANNED, to be prepared."""
    with transaction.atomic():
        deployment.plan, deployment.slots = as_record(plan), plan.slots
        deployment.status_detail = "Planned onto free laptops of its pool; being prepared."
        deployment.save(update_fields=["plan", "slots", "status_detail"])
        record_stages(deployment, plan, nodes)


def is_waiting(deployment: Deployment) -> bool:
    return deployment.status == DeploymentStatus.PLANNED and bool(deployment.plan.get("waiting"))
