"""A plan in words: which layers a machine holds, and which machine holds the pipeline back."""


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
    """The modes table's line for a plan: "39 laptops, 2–3 layers each", the head's part when it holds some."""
    laptops = [stage["count"] for stage in record["stages"][1:] if stage["count"]]
    each = f"{min(laptops)}" if len(set(laptops)) == 1 else f"{min(laptops)}–{max(laptops)}"
    said = f"{len(laptops)} laptop{'s' if len(laptops) != 1 else ''}, {each} layer{'s' if each != '1' else ''} each" \
        if laptops else "no laptop"
    head = record["stages"][0]["count"]
    return f"{said}; the head {head}" if head else said


def split_rows(record: dict) -> list[dict]:
    """The split as the plan page's table shows it: each machine that holds something, in pipeline order."""
    return [{"position": position, "machine": stage["machine"], "bottleneck": stage["machine"] == record["bottleneck"],
             "layers": (f"the token embedding{', ' + stage['layers'] if stage['count'] else ''}"
                        if stage["machine"] == "head" else stage["layers"]),
             "memory": sum(stage["memory"].values()), "usable": stage["usable"], "ms": stage["seconds"] * 1000}
            for position, stage in enumerate(record["stages"]) if stage["count"] or stage["machine"] == "head"]
