"""A plan in words: which layers a machine holds, and which machine holds the pipeline back."""

LISTED_UP_TO = 8  # machines named one by one in a line; past that a line of 39 names reads as noise


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
    name = "the panel's machine (the head)" if slowest["machine"] == "head" else slowest["machine"]
    holds = "the token embedding" + (f" and {slowest['layers']}" if slowest["count"] else "") \
        if slowest["machine"] == "head" else slowest["layers"]
    share = 100 * slowest["seconds"] / total if total else 0
    return (f"The bottleneck is {name}, holding {holds}: {slowest['seconds'] * 1000:.1f} ms of the "
            f"{total * 1000:.1f} ms a token takes ({share:.0f} %).")


def spread(record: dict) -> str:
    """The modes table's line for a plan: each holder and its layers ("lab-3 4 · lab-1 5") while they are few;
    past that a summary ("39 laptops, 2–3 layers each"), the split being in its own table."""
    holders = [(stage["machine"], stage["count"]) for stage in record["stages"] if stage["count"]]
    if len(holders) <= LISTED_UP_TO:
        return " · ".join(f"{machine} {count}" for machine, count in holders)
    laptops = [count for machine, count in holders if machine != "head"]
    each = f"{min(laptops)} layer" if min(laptops) == max(laptops) == 1 else \
        f"{min(laptops)} layers" if min(laptops) == max(laptops) else f"{min(laptops)}–{max(laptops)} layers"
    head = record["stages"][0]["count"]
    return f"{len(laptops)} laptops, {each} each" + (f"; the head {head}" if head else "")


def split_rows(record: dict) -> list[dict]:
    """The split as the plan page's table shows it: each machine that holds something, in pipeline order."""
    return [{"position": position, "machine": stage["machine"], "bottleneck": stage["machine"] == record["bottleneck"],
             "layers": (f"the token embedding{', ' + stage['layers'] if stage['count'] else ''}"
                        if stage["machine"] == "head" else stage["layers"]),
             "memory": sum(stage["memory"].values()), "usable": stage["usable"], "ms": stage["seconds"] * 1000}
            for position, stage in enumerate(record["stages"]) if stage["count"] or stage["machine"] == "head"]
