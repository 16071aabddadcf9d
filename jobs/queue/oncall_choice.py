"""The on-call scheduler's choices, read from the database and changing nothing: where an asleep model would load,
which idle deployment would make room for it, when a deployment has been idle long enough.

A model loads onto the free laptops of its pool: ready, and held by no deployment (planned, preparing, loading,
serving). When those are too few, the deployments holding the rest are looked at, least recently used first: an
idle one (an on-call deployment that is ready, with no job queued or running) may be evicted, or waited for;
one with jobs never is. A model that could not fit on its whole pool even with nothing else loaded has no room
at all: the request is answered 503 with the numbers (`Room`).
"""

from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Exists, Max, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from clusterpanel.kit.units import size
from jobs.models import Job, JobStatus
from models_app.models import Deployment, DeploymentStage, DeploymentStatus, OnCall, OnCallEvent
from models_app.oncall import service as oncall
from models_app.planning import fit, planner
from models_app.planning.records import PlanningError, head_machine, read_machines
from nodes.models import Node

HOLDING = (DeploymentStatus.PLANNED, *Deployment.ACTIVE)  # a planned deployment's stages hold their laptops too
BUSY = (JobStatus.QUEUED, JobStatus.RUNNING)
# What choosing never reads of a deployment and its model: JSON that costs more to decode than the rest.
LARGE = ("plan", "engine", "verification", "model__layer_bytes", "model__other_tensors", "model__tensor_hashes")


@dataclass(frozen=True)
class Room:
    """Why a model cannot load anywhere: what it needs, what its pool has in all and free now."""
    model: str
    ctx: int
    needed: int
    pool: int
    pool_laptops: int
    free: int
    free_laptops: int
    by_hand: int = 0  # laptops of its pool held by deployments made by hand: never unloaded, so never counted

    def words(self) -> str:
        kept = (f" ({self.by_hand} more laptop{'s' if self.by_hand != 1 else ''} of its pool serve"
                f"{'s' if self.by_hand == 1 else ''} deployments made by hand, which the scheduler never stops)"
                if self.by_hand else "")
        return (f"{self.model} cannot be loaded anywhere: it needs {size(self.needed)} at a context of {self.ctx} "
                f"tokens; its pool has {size(self.pool)} usable on {self.pool_laptops} ready "
                f"laptop{'s' if self.pool_laptops != 1 else ''} even with nothing else loaded{kept}, and "
                f"{size(self.free)} free now on {self.free_laptops} free laptop{'s' if self.free_laptops != 1 else ''}."
                " Add laptops to its pool, or lower its context.")


@dataclass(frozen=True)
class Choice:
    """What to do for an asleep model: load `plan` over `nodes` (after stopping `evict`, when there are any);
    or wait for `busy` (deployments with jobs) or for `evict` (idle ones, under the "wait" policy); or nothing
    at all fits (`no_room`)."""
    plan: planner.Plan | None = None
    nodes: list[Node] = field(default_factory=list)
    evict: list[Deployment] = field(default_factory=list)
    busy: list[Deployment] = field(default_factory=list)
    no_room: Room | None = None


def choose(on_call: OnCall) -> Choice:
    """Where `on_call`'s model would load now. Laptops are read only as the choice needs them (reading one costs
    about a millisecond): the free ones, then those of each idle deployment in turn, the whole pool last."""
    pool = oncall.pool_of(on_call)
    holders = holding(pool)
    held = {name for names in holders.values() for name in names}
    machines: oncall.Machines = {}
    free = probed([node for node in pool if node.name not in held], machines)
    plan = try_plan(on_call, free, machines)
    if plan is not None:
        return Choice(plan, free)
    idle = least_recently_used(list(holders))
    freed, weights = list(free), on_call.model.weights_bytes
    for count, deployment in enumerate(idle, start=1):
        freed += probed([node for node in pool if node.name in holders[deployment.pk]], machines)
        if usable(freed, machines) < weights:  # not worth asking the planner
            continue
        plan = try_plan(on_call, in_order(pool, freed), machines)
        if plan is not None:  # only those whose laptops the plan uses are stopped
            used = oncall.laptops_of(plan)
            return Choice(plan, in_order(pool, freed), evict=[d for d in idle[:count] if holders[d.pk] & used])
    # Laptops serving deployments made by hand are not the scheduler's to free: a model that fits only with them
    # has no room, rather than a wait that never ends.
    by_hand = set(Deployment.objects.filter(pk__in=holders, on_call=False).values_list("pk", flat=True))
    kept = {name for pk in by_hand for name in holders[pk]}
    every = probed([node for node in pool if node.name not in machines and node.name not in kept], machines) + freed
    every = [node for node in every if node.name not in kept]
    if try_plan(on_call, in_order(pool, every), machines) is None:
        return Choice(no_room=room(on_call, in_order(pool, every), free, machines, len(kept)))
    busy = Deployment.objects.filter(pk__in=set(holders) - {deployment.pk for deployment in idle} - by_hand)
    return Choice(busy=list(busy.select_related("model").order_by("pk")), evict=idle)


def in_order(pool: list[Node], some: list[Node]) -> list[Node]:
    chosen = {node.pk for node in some}
    return [node for node in pool if node.pk in chosen]


def probed(nodes: list[Node], machines: oncall.Machines) -> list[Node]:
    """Those of `nodes` that were probed, their devices (as if nothing were loaded: a free laptop has nothing
    loaded) added to `machines`."""
    found = read_machines(nodes, empty=True) if nodes else []
    machines.update({node.name: devices for node, devices in zip(nodes, found, strict=True) if devices})
    return [node for node in nodes if node.name in machines]


def usable(nodes: list[Node], machines: oncall.Machines) -> int:
    return sum(machine.usable_bytes for node in nodes for machine in machines[node.name])


def try_plan(on_call: OnCall, nodes: list[Node], machines: oncall.Machines) -> planner.Plan | None:
    try:
        return oncall.plan_on(on_call.model, nodes, machines, on_call.ctx, on_call.slots)
    except PlanningError:
        return None


def holding(nodes: list[Node]) -> dict[int, set[str]]:
    """The deployments that hold these laptops (planned to serving), by id, each with the names of those it holds."""
    stages = DeploymentStage.objects.filter(node__in=nodes, deployment__status__in=HOLDING)
    found: dict[int, set[str]] = {}
    for deployment, name in stages.values_list("deployment_id", "node__name"):
        found.setdefault(deployment, set()).add(name)
    return found


def room(on_call: OnCall, pool: list[Node], free: list[Node], machines: oncall.Machines, by_hand: int = 0) -> Room:
    options = planner.Options(ctx=on_call.ctx, slots=on_call.slots, head_may_hold_layers=False)
    every = [machine for node in pool for machine in machines[node.name]]
    needed = fit.explain_no_fit(planner.shape_of(on_call.model), head_machine(), every, options).needed
    return Room(on_call.model.name, on_call.ctx, needed, usable(pool, machines), len(pool), usable(free, machines),
                len(free), by_hand)


def idle_on_call():
    """On-call deployments that are ready with no job queued or running, each annotated with `last_job` (the
    latest moment one of its jobs was made, started or ended) and `last_event` (its latest load record)."""
    jobs = Job.objects.filter(deployment=OuterRef("pk"))
    last_job = (jobs.order_by().values("deployment")
                .annotate(at=Max(Coalesce("finished", "started", "created"))).values("at"))
    last_event = OnCallEvent.objects.filter(deployment=OuterRef("pk")).order_by("-at").values("at")[:1]
    return (Deployment.objects.filter(on_call=True, status=DeploymentStatus.READY)
            .exclude(Exists(jobs.filter(status__in=BUSY)))
            .annotate(last_job=Subquery(last_job), last_event=Subquery(last_event)).select_related("model")
            .defer(*LARGE))


def last_used(deployment: Deployment) -> datetime:
    """When it was last used: its latest job or load record (it was loaded after it was made), else when made."""
    moments = [getattr(deployment, "last_job", None), getattr(deployment, "last_event", None)]
    return max((moment for moment in moments if moment is not None), default=deployment.created)


def least_recently_used(deployments: list[int]) -> list[Deployment]:
    """Those of `deployments` (ids) that are idle on-call ones, least recently used first; never one with jobs."""
    idle = list(idle_on_call().filter(pk__in=deployments))
    return sorted(idle, key=lambda deployment: (last_used(deployment), deployment.pk))


def idle_too_long(minute_s: float, now: datetime | None = None) -> list[tuple[Deployment, float]]:
    """Idle on-call deployments of models still on call whose idle time has passed, each with its idle seconds."""
    now = now or timezone.now()
    found = []
    for deployment in idle_on_call().filter(model__on_call__isnull=False).select_related("model__on_call"):
        idle_s = (now - last_used(deployment)).total_seconds()
        if idle_s >= deployment.model.on_call.idle_minutes * minute_s:
            found.append((deployment, idle_s))
    return found
