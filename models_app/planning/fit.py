"""What fits: the most slots a plan can carry at the context asked, and, when nothing fits, why in numbers:
in all, per device that cannot hold one layer, and per device a mode's split would overfill."""

from collections import Counter
from dataclasses import dataclass, field

from clusterpanel.kit.units import size
from models_app.planning import words as plan_words
from models_app.planning.planner import (
    SLOT_CHOICES,
    GiB,
    Machine,
    MiB,
    ModelShape,
    Options,
    Plan,
    head_compute_bytes,
    kv_bytes_per_layer,
    layer_compute_bytes,
    mode_counts,
    one_unit_bytes,
    plan_mode,
    stage_memory,
    usable_devices,
)


@dataclass(frozen=True)
class NoFit:
    needed: int
    usable: int
    largest_ctx: int  # at the same slots
    reasons: list[str] = field(default_factory=list)
    slots: int = 1
    largest_slots: int = 0  # at the same context, fewer slots that would fit

    def explain(self) -> str:
        people = f" with {self.slots} slots" if self.slots > 1 else ""
        text = (f"The model needs {self.needed / GiB:.1f} GiB{people}; the chosen machines have "
                f"{self.usable / GiB:.1f} GiB usable, {max(self.needed - self.usable, 0) / GiB:.1f} GiB short.")
        if self.largest_slots:
            text += f" With {self.largest_slots} {'slots' if self.largest_slots > 1 else 'slot'} it would fit."
        if self.largest_ctx:
            text += f" A context of {self.largest_ctx} tokens{people} would fit."
        return " ".join([text, *self.reasons])


def explain_no_fit(shape: ModelShape, head: Machine, laptops: list[Machine], options: Options,
                   mode: str = "fastest", manual: list[int] | None = None) -> NoFit:
    """Why nothing fits in this mode, in numbers, counting only the devices that may hold layers."""
    kept, left_out = usable_devices(shape, laptops, options)
    holders = kept + ([head] if options.head_may_hold_layers else [])
    usable = sum(m.usable_bytes for m in holders)
    per_device = options.calibration.server_base + layer_compute_bytes(shape, options)
    needed = (sum(shape.layer_bytes) + shape.output_bytes + kv_bytes_per_layer(shape, options) * shape.n_layer
              + len(holders) * per_device)
    if options.head_may_hold_layers:
        needed += shape.token_embd_bytes + options.calibration.head_base + head_compute_bytes(shape, options)
    largest, ctx = 0, options.ctx // 2
    while ctx >= 256 and not largest:
        if plan_mode(mode, shape, head, laptops, options.with_(ctx=ctx), manual):
            largest = ctx
        ctx //= 2
    fewer = [n for n in SLOT_CHOICES if n < options.slots]
    largest_slots = next((n for n in fewer if plan_mode(mode, shape, head, laptops, options.with_(slots=n),
                                                          manual)), 0)
    reasons = [*too_small(shape, kept, left_out, options), *overfilled(mode, shape, head, kept, options, manual)]
    reasons += [] if needed > usable else [
        "There is enough memory in total, but not in the pieces: the output layer "
        f"({shape.output_bytes / MiB:.0f} MiB) must fit on the last device together with its layers, and every "
        f"device needs {per_device / MiB:.0f} MiB for its working memory at this context. Add a laptop with more "
        "free memory, or use a smaller quantization."]
    return NoFit(needed, usable, largest, reasons, options.slots, largest_slots)


def too_small(shape: ModelShape, kept: list[Machine], left_out: tuple, options: Options) -> list[str]:
    """Each device that cannot hold one layer: a GPU beside a CPU is left out; a laptop's only device is why the
    laptop cannot take part."""
    need, per_laptop = one_unit_bytes(shape, options), Counter(machine.name for machine in kept)
    alone = [machine for machine in kept if machine.usable_bytes < need]
    said = [f"{plan_words.too_small(m, need, per_laptop[m.name] > 1 or m.device != 'CPU')}." for m in alone]
    return said + [f"{plan_words.too_small(machine, needs)}; it is left out." for machine, needs in left_out]


def overfilled(mode: str, shape: ModelShape, head: Machine, kept: list[Machine], options: Options,
               manual: list[int] | None) -> list[str]:
    """Where a "memory", "even" or "manual" split first asks a device for more than it has."""
    counts = None if mode == "fastest" else mode_counts(mode, shape, kept, options, manual)
    if not counts:
        return []
    first, per_laptop = 0, Counter(machine.name for machine in kept)
    for index, (machine, count) in enumerate(zip([head, *kept], counts, strict=True)):
        memory = stage_memory(shape, first, count, options, is_head=index == 0)
        if (count or not index) and memory.total > machine.usable_bytes:
            who = "the panel's machine (the head)" if not index else plan_words.device_label(
                machine.name, machine.device, per_laptop[machine.name] > 1 or machine.device != "CPU")
            held = plan_words.layers(first, count, shape.n_layer)
            return [f"In the {mode} split, {who} would hold {held}, needing {size(memory.total)} of its "
                    f"{size(machine.usable_bytes)} usable ({size(memory.total - machine.usable_bytes)} short)."]
        first += count
    return []


def most_slots(mode: str, shape: ModelShape, head: Machine, laptops: list[Machine], options: Options,
               manual: list[int] | None = None) -> Plan | None:
    """The plan with the most of SLOT_CHOICES slots that fits at the context asked (None: not even one)."""
    for slots in SLOT_CHOICES:
        found = plan_mode(mode, shape, head, laptops, options.with_(slots=slots), manual)
        if found:
            return found
    return None
