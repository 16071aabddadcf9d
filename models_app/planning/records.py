"""From the database to the planner and back: machines as the planner sees them, plans as records."""

import os
from collections import Counter, defaultdict
from dataclasses import asdict

from django.conf import settings
from django.db.models import OuterRef, Prefetch, Subquery

from clusterpanel.kit.natural import natural_key, natural_sorted
from models_app.models import Deployment, DeploymentStage, GgufModel
from models_app.planning import fit, planner
from models_app.planning import words as plan_words
from nodes.metrics import store as metrics
from nodes.models import LinkCheck, Node, Probe
from nodes.probing.devices import Device, listed_devices
from nodes.runtime import bundle as runtime

DEFAULT_SPEED_GB_S = 5.0  # until a laptop's speed is measured
MAX_SLOTS = 64
ROUND_TRIPS_PER_TOKEN = 4  # graph compute and tensor copies, per RPC device and token
GPU_RESERVE_BYTES, GPU_RESERVE_SHARE = 256 * planner.MiB, 0.05  # of a GPU's own memory: its driver, the screen
GPU_BACKEND_RAM = 80 * planner.MiB  # lavapipe's Vulkan loaded in a server: 73 MiB more (bench/vulkan_device.py)


class PlanningError(Exception):
    pass


def head_machine() -> planner.Machine:
    """The panel's own machine: its free RAM minus a reserve, its speed from the environment."""
    meminfo = dict(line.split(":", 1) for line in open("/proc/meminfo").read().splitlines() if ":" in line)
    available = int(meminfo.get("MemAvailable", "0 kB").split()[0]) * 1024
    reserve = int(getattr(settings, "HEAD_MEMORY_RESERVE", 2 << 30))
    speed = float(os.environ.get("HEAD_SPEED_GB_S", DEFAULT_SPEED_GB_S))
    return planner.Machine("head", max(available - reserve, 0), speed)


def claimed_bytes(nodes: list[Node], replacing: Deployment | None = None) -> dict[tuple[int, str], int]:
    """Memory that running deployments (but the one being re-planned) already hold, by (laptop id, device): each
    device's as the stage lists it, else the stage's whole memory on the CPU (planned before devices)."""
    stages = DeploymentStage.objects.filter(node__in=nodes, deployment__status__in=Deployment.ACTIVE)
    if replacing is not None:
        stages = stages.exclude(deployment=replacing)
    claimed: dict[tuple[int, str], int] = defaultdict(int)
    for node_id, memory, devices in stages.values_list("node_id", "memory", "devices"):
        for device in devices or [{"device": "CPU", "memory": memory}]:
            claimed[node_id, device["device"]] += sum(device["memory"].values())
    return claimed


def hop_seconds(node: Node) -> float:
    check = node.link_checks.first()
    return ROUND_TRIPS_PER_TOKEN * check.report["rtt_median_ms"] / 1000 if check else 0.001


def latest_of(model):
    """Each laptop's latest row of `model` (a Probe, a LinkCheck): what `.first()` reads, prefetched."""
    newest = model.objects.filter(node=OuterRef("node")).order_by("-created").values("pk")[:1]
    return model.objects.filter(pk=Subquery(newest))


def read_machines(nodes: list[Node], replacing: Deployment | None = None,
                  empty: bool = False) -> list[list[planner.Machine] | None]:
    """Each laptop's devices as the planner sees them (None: not probed yet), laptops in the order given, read
    in four queries whatever their number (three queries per laptop and mode made a plan over 39 laptops wait
    on the database). `empty`: as if no deployment held any of them (what an on-call model's pool could hold)."""
    latest = (Prefetch("probes", queryset=latest_of(Probe)), Prefetch("link_checks", queryset=latest_of(LinkCheck)))
    fresh = Node.objects.prefetch_related(*latest).in_bulk([node.pk for node in nodes])
    claimed = {} if empty else claimed_bytes(nodes, replacing)
    return [device_machines(fresh.get(node.pk, node), claimed) for node in nodes]


def device_machines(node: Node, claimed: dict[tuple[int, str], int]) -> list[planner.Machine] | None:
    """The laptop's devices the planner may use, in its server's order: each GPU with memory of its own (what was
    free less a reserve), and one of the devices that share its RAM (the CPU, unless an integrated or software
    GPU was measured faster), with the laptop's usable RAM. Devices kept out by an admin are left out."""
    ram = node.usable_bytes()
    if ram is None:
        return None
    every = listed_devices(node)
    listed = [device for device in every if device.name not in node.devices_off]
    shared = sharing_ram(node, [device for device in listed if device.host_memory])
    in_ram = sum(claimed.get((node.pk, name), 0) for name in {"CPU", *(d.name for d in every if d.host_memory)})
    used = [device for device in listed if not device.host_memory or device is shared]
    # A server using a GPU loads its backend and driver, which live in the laptop's RAM whatever the GPU holds.
    in_ram += GPU_BACKEND_RAM if any(not device.is_cpu for device in used) else 0
    hop, machines, wifi = hop_seconds(node), [], on_wifi(node)
    for device in used:
        free = ram - in_ram if device.host_memory else own_memory(device) - claimed.get((node.pk, device.name), 0)
        if device.host_memory and not device.is_cpu and device.total:  # RAM, but no more than its driver offers
            free = min(free, own_memory(device))
        speed = node.speed_gb_s if device.is_cpu else node.device_speeds.get(device.name)
        machines.append(planner.Machine(node.name, max(free, 0), speed or DEFAULT_SPEED_GB_S, hop, device.name,
                                        device.description, measured=bool(speed), wifi=wifi))
    return machines


def on_wifi(node: Node) -> bool:
    """Whether the laptop's latest probe found it on Wi-Fi (the planner then prefers wired laptops)."""
    probe = node.probes.first()
    return bool(probe and probe.facts.get("link_kind") == "wifi")


def sharing_ram(node: Node, candidates: list[Device]) -> Device | None:
    """The one device to plan on of those that share the laptop's RAM: the CPU, unless another's speed was
    measured and is faster than the CPU's (measured too)."""
    cpu = next((device for device in candidates if device.is_cpu), None)
    measured = [device for device in candidates if not device.is_cpu and node.device_speeds.get(device.name)]
    fastest = max(measured, key=lambda device: node.device_speeds[device.name], default=None)
    if cpu is None:
        return fastest or next(iter(candidates), None)
    faster = fastest and node.speed_gb_s and node.device_speeds[fastest.name] > node.speed_gb_s
    return fastest if faster else cpu


def own_memory(device: Device) -> int:
    """A GPU's memory the planner may fill: what was free less a reserve for its driver and any screen."""
    return max(device.free - max(GPU_RESERVE_BYTES, round(GPU_RESERVE_SHARE * (device.total or device.free))), 0)


def machines_for(nodes: list[Node], replacing: Deployment | None = None) -> list[planner.Machine]:
    """Every device of the laptops, a laptop's side by side; PlanningError if one has not been probed."""
    laptops = read_machines(nodes, replacing)
    unprobed = next((node for node, devices in zip(nodes, laptops, strict=True) if devices is None), None)
    if unprobed is not None:
        raise PlanningError(f"{unprobed} has not been probed yet; probe it first.")
    return [machine for devices in laptops for machine in devices]


def limit_words() -> str:
    return f"llama.cpp as built here runs one model over at most {runtime.MAX_LAPTOPS} laptops"


def best_within_limit(nodes: list[Node], named: list[str]) -> tuple[list[Node], list[Node]]:
    """When more laptops are offered than one model can span: those named first, then the fastest, then the
    roomiest (the unprobed last), up to the limit, kept in the order given; and those left out."""
    if len(nodes) <= runtime.MAX_LAPTOPS:
        return nodes, []
    laptops = dict(zip((node.pk for node in nodes), read_machines(nodes), strict=True))

    def rank(node: Node) -> tuple:
        devices = laptops[node.pk] or [planner.Machine(node.name, -1, 0.0)]
        return (node.name not in named, -max(m.bandwidth_gb_s for m in devices),
                -sum(m.usable_bytes for m in devices), natural_key(node.name))

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
        raise PlanningError(fit.explain_no_fit(planner.shape_of(model), head, laptops, options, mode,
                                                    manual).explain())
    if len(found.tensor_split) > runtime.MAX_LAPTOPS:  # "memory" and "even" use every device that holds a layer
        raise PlanningError(f"The {mode} split would use {len(found.tensor_split)} devices (a laptop's GPU and CPU "
                            f"are two); llama.cpp as built here holds at most {runtime.MAX_LAPTOPS} besides the "
                            "head. Choose fewer laptops, or keep some of their devices out of plans.")
    return found


def as_record(plan: planner.Plan) -> dict:
    """The plan as deployments keep it and pages show it: a stage per device used ("machine" its laptop, "label"
    how words name it), the bottleneck's laptop and label, and notes (devices left out, speeds not measured)."""
    n_layer = sum(stage.count for stage in plan.stages) - 1
    per_laptop = Counter(stage.machine.name for stage in plan.stages[1:])
    stages = [stage_record(stage, plan.slots, n_layer, per_laptop) for stage in plan.stages]
    slowest = max(stages, key=lambda stage: stage["seconds"])
    record = {
        "mode": plan.mode, "n_gpu_layers": plan.n_gpu_layers, "tensor_split": list(plan.tensor_split),
        "ctx": plan.ctx, "slots": plan.slots, "kv_cache": plan.kv_cache,
        "tokens_per_second": round(plan.tokens_per_second, 2), "bottleneck": plan.bottleneck,
        "bottleneck_label": slowest["label"], "stages": stages,
    }
    left_out = [f"{plan_words.too_small(machine, needs)}; it is left out." for machine, needs in plan.left_out]
    wifi = sorted({stage.machine.name for stage in plan.stages[1:] if stage.machine.wifi})
    notes = [*left_out, *filter(None, [plan_words.unmeasured(stages[1:]), plan_words.on_wifi(wifi)])]
    return {**record, "bottleneck_said": plan_words.bottleneck(record), "spread": plan_words.spread(record),
            "notes": notes}


def stage_record(stage: planner.Stage, slots: int, n_layer: int, per_laptop: Counter) -> dict:
    machine = stage.machine
    named = machine.name != "head" and (per_laptop[machine.name] > 1 or machine.device != "CPU")
    return {"machine": machine.name, "device": machine.device,
            "label": plan_words.device_label(machine.name, machine.device, named),
            "first": stage.first, "count": stage.count, "memory": asdict(stage.memory),
            "usable": machine.usable_bytes, "layers": plan_words.layers(stage.first, stage.count, n_layer),
            "seconds": planner.stage_time(stage, slots), "speed_gb_s": machine.bandwidth_gb_s,
            "measured": machine.measured}


def laptops_to_watch(nodes: list[Node]) -> list[dict]:
    """The chosen laptops on battery, throttling or on Wi-Fi, each with its flags (nodes/probing/power.py)."""
    samples = metrics.latest([node.pk for node in nodes])
    found = [{"name": node.name, "flags": node.power_flags(samples.get(node.pk))} for node in nodes]
    return [laptop for laptop in found if laptop["flags"]]


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
