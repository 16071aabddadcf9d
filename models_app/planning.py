"""From the database to the planner and back: machines as the planner sees them, plans as records."""

import os
from dataclasses import asdict

from django.conf import settings

from models_app import planner
from models_app.models import Deployment, DeploymentStage, GgufModel
from nodes.models import Node

DEFAULT_SPEED_GB_S = 5.0  # until a laptop's speed is measured
ROUND_TRIPS_PER_TOKEN = 4  # graph compute and tensor copies, per RPC device and token


class PlanningError(Exception):
    pass


def head_machine() -> planner.Machine:
    """The panel's own machine: its free RAM minus a reserve, its speed from the environment."""
    meminfo = dict(line.split(":", 1) for line in open("/proc/meminfo").read().splitlines() if ":" in line)
    available = int(meminfo.get("MemAvailable", "0 kB").split()[0]) * 1024
    reserve = int(getattr(settings, "HEAD_MEMORY_RESERVE", 2 << 30))
    speed = float(os.environ.get("HEAD_SPEED_GB_S", DEFAULT_SPEED_GB_S))
    return planner.Machine("head", max(available - reserve, 0), speed)


def claimed_bytes(node: Node, replacing: Deployment | None = None) -> int:
    """Memory that running deployments (but the one being re-planned) already hold on this laptop."""
    stages = DeploymentStage.objects.filter(node=node, deployment__status__in=Deployment.ACTIVE)
    if replacing is not None:
        stages = stages.exclude(deployment=replacing)
    return sum(sum(stage.memory.values()) for stage in stages)


def hop_seconds(node: Node) -> float:
    check = node.link_checks.first()
    return ROUND_TRIPS_PER_TOKEN * check.report["rtt_median_ms"] / 1000 if check else 0.001


def machine_for(node: Node, replacing: Deployment | None = None) -> planner.Machine:
    usable = node.usable_bytes()
    if usable is None:
        raise PlanningError(f"{node} has not been probed yet; probe it first.")
    return planner.Machine(node.name, max(usable - claimed_bytes(node, replacing), 0),
                           node.speed_gb_s or DEFAULT_SPEED_GB_S, hop_seconds(node))


def make_plan(model: GgufModel, nodes: list[Node], ctx: int, mode: str = "fastest",
              head: planner.Machine | None = None, manual: list[int] | None = None,
              head_layers: bool = False, replacing: Deployment | None = None) -> planner.Plan:
    """`head_layers`: whether the panel's own machine may hold layers too (it always holds the embedding).
    `replacing`: a deployment being re-planned, whose own memory on the laptops counts as free."""
    if ctx < 64 or ctx > max(model.context_length, 64):
        raise PlanningError(f"Context must be between 64 and {model.context_length} tokens (the model's own).")
    if mode not in ("fastest", "memory", "even", "manual"):
        raise PlanningError(f"Unknown mode {mode!r}: use fastest, memory, even or manual.")
    if not nodes and not head_layers:
        raise PlanningError("Choose at least one laptop, or let the head hold layers.")
    options = planner.Options(ctx=ctx, head_may_hold_layers=head_layers)
    head = head or head_machine()
    laptops = [machine_for(node, replacing) for node in nodes]
    found = planner.plan_mode(mode, planner.shape_of(model), head, laptops, options, manual)
    if found is None:
        raise PlanningError(planner.explain_no_fit(planner.shape_of(model), head, laptops, options, mode).explain())
    return found


def as_record(plan: planner.Plan) -> dict:
    return {
        "mode": plan.mode, "n_gpu_layers": plan.n_gpu_layers, "tensor_split": list(plan.tensor_split),
        "tokens_per_second": round(plan.tokens_per_second, 2), "bottleneck": plan.bottleneck,
        "stages": [{"machine": s.machine.name, "first": s.first, "count": s.count, "memory": asdict(s.memory),
                    "usable": s.machine.usable_bytes} for s in plan.stages],
    }
