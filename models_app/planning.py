"""From the database to the planner and back: machines as the planner sees them, plans as records."""

import os
from collections import defaultdict
from dataclasses import asdict

from django.conf import settings
from django.db.models import OuterRef, Prefetch, Subquery

from clusterpanel.natural import natural_key, natural_sorted
from models_app import fit, plan_words, planner
from models_app.models import Deployment, DeploymentStage, GgufModel
from nodes import runtime
from nodes.models import LinkCheck, Node, Probe

DEFAULT_SPEED_GB_S = 5.0  # until a laptop's speed is measured
MAX_SLOTS = 64
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


def claimed_bytes(nodes: list[Node], replacing: Deployment | None = None) -> dict[int, int]:
    """Memory that running deployments (but the one being re-planned) already hold, by laptop id."""
    stages = DeploymentStage.objects.filter(node__in=nodes, deployment__status__in=Deployment.ACTIVE)
    if replacing is not None:
        stages = stages.exclude(deployment=replacing)
    claimed: dict[int, int] = defaultdict(int)
    for node_id, memory in stages.values_list("node_id", "memory"):
        claimed[node_id] += sum(memory.values())
    return claimed


def hop_seconds(node: Node) -> float:
    check = node.link_checks.first()
    return ROUND_TRIPS_PER_TOKEN * check.report["rtt_median_ms"] / 1000 if check else 0.001


def latest_of(model):
    """Each laptop's latest row of `model` (a Probe, a LinkCheck): what `.first()` reads, prefetched."""
    newest = model.objects.filter(node=OuterRef("node")).order_by("-created").values("pk")[:1]
    return model.objects.filter(pk=Subquery(newest))


def read_machines(nodes: list[Node], replacing: Deployment | None = None) -> list[planner.Machine | None]:
    """The laptops as the planner sees them (None: not probed yet), in the order given, read in four queries
    whatever their number (three queries per laptop and mode made a plan over 39 laptops wait on the database)."""
    latest = (Prefetch("probes", queryset=latest_of(Probe)), Prefetch("link_checks", queryset=latest_of(LinkCheck)))
    fresh = Node.objects.prefetch_related(*latest).in_bulk([node.pk for node in nodes])
    claimed = claimed_bytes(nodes, replacing)
    machines = []
    for node in (fresh.get(node.pk, node) for node in nodes):
        usable = node.usable_bytes()
        machines.append(None if usable is None else planner.Machine(
            node.name, max(usable - claimed[node.pk], 0), node.speed_gb_s or DEFAULT_SPEED_GB_S, hop_seconds(node)))
    return machines


def machines_for(nodes: list[Node], replacing: Deployment | None = None) -> list[planner.Machine]:
    machines = read_machines(nodes, replacing)
    unprobed = next((node for node, machine in zip(nodes, machines, strict=True) if machine is None), None)
    if unprobed is not None:
        raise PlanningError(f"{unprobed} has not been probed yet; probe it first.")
    return machines


def limit_words() -> str:
    return f"llama.cpp as built here runs one model over at most {runtime.MAX_LAPTOPS} laptops"


def best_within_limit(nodes: list[Node], named: list[str]) -> tuple[list[Node], list[Node]]:
    """When more laptops are offered than one model can span: those named first, then the fastest, then the
    roomiest (the unprobed last), up to the limit, kept in the order given; and those left out."""
    if len(nodes) <= runtime.MAX_LAPTOPS:
        return nodes, []
    machines = dict(zip((node.pk for node in nodes), read_machines(nodes), strict=True))

    def rank(node: Node) -> tuple:
        machine = machines[node.pk] or planner.Machine(node.name, -1, 0.0)
        return (node.name not in named, -machine.bandwidth_gb_s, -machine.usable_bytes, natural_key(node.name))

    kept = {node.pk for node in sorted(nodes, key=rank)[:runtime.MAX_LAPTOPS]}
    return [n for n in nodes if n.pk in kept], natural_sorted([n for n in nodes if n.pk not in kept], lambda n: n.name)


def left_out_words(left_out: list[Node]) -> str:
    """Why some offered laptops are not in the plan, in words ("" when none is left out)."""
    if not left_out:
        return ""
    names = ", ".join(node.name for node in left_out)
    return f"{limit_words()}; left out (the slowest, then those with least memory): {names}."


def make_plan(model: GgufModel, nodes: list[Node], ctx: int, mode: str = "fastest",
              head: planner.Machine | None = None, manual: list[int] | None = None,
              head_layers: bool = False, replacing: Deployment | None = None, slots: int | None = 1,
              machines: list[planner.Machine] | None = None) -> planner.Plan:
    """`head_layers`: whether the panel's own machine may hold layers too (it always holds the embedding).
    `machines`: the laptops as `machines_for` read them, when one request plans several modes over them.
    `replacing`: a deployment being re-planned, whose own memory on the laptops counts as free.
    `slots`: people served at once, each with up to `ctx` tokens; None: the most of 8, 4, 2, 1 that fit."""
    if ctx < 64 or ctx > max(model.context_length, 64):
        raise PlanningError(f"Context must be between 64 and {model.context_length} tokens (the model's own).")
    if slots is not None and not 1 <= slots <= MAX_SLOTS:
        raise PlanningError(f"Slots must be between 1 and {MAX_SLOTS}: how many people the model serves at once.")
    if mode not in ("fastest", "memory", "even", "manual"):
        raise PlanningError(f"Unknown mode {mode!r}: use fastest, memory, even or manual.")
    if not nodes and not head_layers:
        raise PlanningError("Choose at least one laptop, or let the head hold layers.")
    if len(nodes) > runtime.MAX_LAPTOPS:
        raise PlanningError(f"{limit_words()}, and {len(nodes)} were chosen: choose at most {runtime.MAX_LAPTOPS}.")
    options = planner.Options(ctx=ctx, slots=slots or 1, head_may_hold_layers=head_layers,
                              max_laptops=runtime.MAX_LAPTOPS)
    head = head or head_machine()
    laptops = machines if machines is not None else machines_for(nodes, replacing)
    if slots is None:
        found = fit.most_slots(mode, planner.shape_of(model), head, laptops, options, manual)
    else:
        found = planner.plan_mode(mode, planner.shape_of(model), head, laptops, options, manual)
    if found is None:
        raise PlanningError(fit.explain_no_fit(planner.shape_of(model), head, laptops, options, mode).explain())
    return found


def as_record(plan: planner.Plan) -> dict:
    n_layer = sum(stage.count for stage in plan.stages) - 1
    record = {
        "mode": plan.mode, "n_gpu_layers": plan.n_gpu_layers, "tensor_split": list(plan.tensor_split),
        "ctx": plan.ctx, "slots": plan.slots, "kv_cache": plan.kv_cache,
        "tokens_per_second": round(plan.tokens_per_second, 2), "bottleneck": plan.bottleneck,
        "stages": [{"machine": s.machine.name, "first": s.first, "count": s.count, "memory": asdict(s.memory),
                    "usable": s.machine.usable_bytes, "layers": plan_words.layers(s.first, s.count, n_layer),
                    "seconds": planner.stage_seconds(s.memory, s.machine, s.count > 0 and i > 0, plan.slots)}
                   for i, s in enumerate(plan.stages)],
    }
    return {**record, "bottleneck_said": plan_words.bottleneck(record), "spread": plan_words.spread(record)}


def people_at_once(record: dict) -> str:
    """What a plan record promises, in words: "4 people at once, each up to 2048 tokens (KV cache ...)"."""
    slots, kv = record.get("slots", 1), record.get("kv_cache", 0) / planner.MiB
    if slots == 1:
        return f"1 person at a time, up to {record['ctx']} tokens (the KV cache takes {kv:.0f} MiB)."
    return (f"{slots} people at once, each up to {record['ctx']} tokens (the KV cache takes {kv:.0f} MiB in all, "
            f"{kv / slots:.0f} MiB each).")


def why_these_slots(slots: int, ctx: int) -> str:
    """Why a plan whose slots nobody chose has `slots` (fit.most_slots tried more first)."""
    if slots == planner.SLOT_CHOICES[0]:
        return f"{slots} slots: the most offered unless you choose, and they fit."
    tried = next(n for n in reversed(planner.SLOT_CHOICES) if n > slots)
    fit = f"{slots} fit" if slots > 1 else "only 1 fits"
    return f"With {tried} slots of {ctx} tokens each it would not fit these machines; {fit}."
