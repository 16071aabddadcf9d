"""A plan in words: which layers a machine holds, and which machine holds the pipeline back. A device is
named beside its laptop ("gpu1's Vulkan0") where the laptop alone would not say which: a laptop with more than
one device in the plan, or a device that is not its CPU."""

from clusterpanel.kit.units import size
from models_app.planning.split_search import WIFI_PREFERENCE

LISTED_UP_TO = 8  # machines named one by one in a line; past that a line of 39 names reads as noise


def device_label(laptop: str, device: str, named: bool) -> str:
    """"gpu1's Vulkan0" when `named`, else "gpu1"."""
    return f"{laptop}'s {device}" if named else laptop


def label(stage: dict) -> str:
    """A record's stage as the words name it (a plan recorded before devices: its machine)."""
    return stage.get("label", stage["machine"])


def too_small(machine, needs: int, named: bool = True) -> str:
    """"gpu1's Vulkan0 (llvmpipe, 2.0 GiB usable) cannot hold even one layer (needs 2.3 GiB)", of a planner's
    Machine."""
    usable = f"{size(machine.usable_bytes)} usable"
    what = ", ".join(part for part in (machine.description.split(" (")[0].strip(), usable) if part)
    name = device_label(machine.name, machine.device, named)
    return f"{name} ({what}) cannot hold even one layer (needs {size(needs)})"


def unmeasured(stages: list[dict]) -> str:
    """"Not measured yet, so planned at 5 GB/s: gpu1's Vulkan0, gpu2's Vulkan0." ("" when all were measured)."""
    guessed = [stage for stage in stages if stage.get("measured") is False]
    if not guessed:
        return ""
    names = [label(stage) for stage in guessed]
    listed = ", ".join(names) if len(names) <= LISTED_UP_TO else f"{len(names)} devices"
    speeds = " or ".join(sorted({f"{stage['speed_gb_s']:g} GB/s" for stage in guessed}))
    return f"Not measured yet, so planned at {speeds}: {listed}. Measure them on their laptops' pages."


def on_wifi(names: list[str]) -> str:
    """Why a laptop on Wi-Fi holds less than a wired one alike ("" when none in the plan is on Wi-Fi)."""
    if not names:
        return ""
    listed = ", ".join(names) if len(names) <= LISTED_UP_TO else f"{len(names)} laptops"
    share = round(100 * (1 - WIFI_PREFERENCE))
    return (f"On Wi-Fi: {listed}. The plan counts a Wi-Fi laptop {share} % slower than it is, so that wired "
            "laptops alike take the busy stages: a wireless link's delay varies, and one laptop's drop stops the "
            "whole pipeline. Plug in a cable to plan it as fast as it is.")


def layers(first: int, count: int, n_layer: int) -> str:
    """"layers 40–41", "layer 7", "layers 78–79 and the output layer", "the output layer", "no layers"."""
    last = first + count - 1
    if count == 0:
        return "no layers"
    if last < n_layer:
        return f"layer {first}" if count == 1 else f"layers {first}–{last}"
    if count == 1:
        return "the output layer"
    blocks = f"layer {first}" if count == 2 else f"layers {first}–{last - 1}"
    return f"{blocks} and the output layer"


def bottleneck(record: dict) -> str:
    """The machine whose share of a token's time is largest, and why, in a sentence."""
    total = sum(stage["seconds"] for stage in record["stages"])
    slowest = max(record["stages"], key=lambda stage: stage["seconds"])
    name = "the panel's machine (the head)" if slowest["machine"] == "head" else label(slowest)
    holds = "the token embedding" + (f" and {slowest['layers']}" if slowest["count"] else "") \
        if slowest["machine"] == "head" else slowest["layers"]
    share = 100 * slowest["seconds"] / total if total else 0
    return (f"The bottleneck is {name}, holding {holds}: {slowest['seconds'] * 1000:.1f} ms of the "
            f"{total * 1000:.1f} ms a token takes ({share:.0f} %).")


def spread(record: dict) -> str:
    """The modes table's line for a plan: each holder and its layers ("lab-3 4 · lab-1 5") while they are few;
    past that a summary ("39 laptops, 2–3 layers each"), the split being in its own table."""
    holders = [(label(stage), stage["count"]) for stage in record["stages"] if stage["count"]]
    if len(holders) <= LISTED_UP_TO:
        return " · ".join(f"{machine} {count}" for machine, count in holders)
    laptops = [count for machine, count in holders if machine != "head"]
    each = f"{min(laptops)} layer" if min(laptops) == max(laptops) == 1 else \
        f"{min(laptops)} layers" if min(laptops) == max(laptops) else f"{min(laptops)}–{max(laptops)} layers"
    head = record["stages"][0]["count"]
    machines = {stage["machine"] for stage in record["stages"][1:] if stage["count"]}
    where = f"{len(laptops)} laptops" if len(machines) == len(laptops) else \
        f"{len(machines)} laptops, {len(laptops)} devices"
    return f"{where}, {each} each" + (f"; the head {head}" if head else "")


def split_rows(record: dict) -> list[dict]:
    """The split as the plan page's table shows it: each device that holds something, in pipeline order."""
    slowest = max(range(len(record["stages"])), key=lambda position: record["stages"][position]["seconds"])
    return [{"position": position, "machine": label(stage), "bottleneck": position == slowest,
             "layers": (f"the token embedding{', ' + stage['layers'] if stage['count'] else ''}"
                        if stage["machine"] == "head" else stage["layers"]),
             "memory": sum(stage["memory"].values()), "usable": stage["usable"], "ms": stage["seconds"] * 1000}
            for position, stage in enumerate(record["stages"]) if stage["count"] or stage["machine"] == "head"]


def laptop_runs(stages: list[dict]) -> list[list[int]]:
    """Indices of a plan record's stages after the head, laptop by laptop: a laptop's devices are side by side."""
    runs: list[list[int]] = []
    for index in range(1, len(stages)):
        if runs and stages[index]["machine"] == stages[runs[-1][0]]["machine"]:
            runs[-1].append(index)
        else:
            runs.append([index])
    return runs
