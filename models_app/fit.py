"""What fits: the most slots a plan can carry at the context asked, and, when nothing fits, why in numbers."""

from dataclasses import dataclass, field

from models_app.planner import (
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
    plan_mode,
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
                   mode: str = "fastest") -> NoFit:
    """Why nothing fits in this mode, in numbers, counting only the machines that may hold layers."""
    holders = laptops + ([head] if options.head_may_hold_layers else [])
    usable = sum(m.usable_bytes for m in holders)
    per_device = options.calibration.server_base + layer_compute_bytes(shape, options)
    needed = (sum(shape.layer_bytes) + shape.output_bytes + kv_bytes_per_layer(shape, options) * shape.n_layer
              + len(holders) * per_device)
    if options.head_may_hold_layers:
        needed += shape.token_embd_bytes + options.calibration.head_base + head_compute_bytes(shape, options)
    largest, ctx = 0, options.ctx // 2
    while ctx >= 256 and not largest:
        if plan_mode(mode, shape, head, laptops, options.with_(ctx=ctx)):
            largest = ctx
        ctx //= 2
    fewer = [n for n in SLOT_CHOICES if n < options.slots]
    largest_slots = next((n for n in fewer if plan_mode(mode, shape, head, laptops, options.with_(slots=n))), 0)
    reasons = [] if needed > usable else [
        "There is enough memory in total, but not in the pieces: the output layer "
        f"({shape.output_bytes / MiB:.0f} MiB) must fit on the last laptop together with its layers, and every "
        f"laptop needs {per_device / MiB:.0f} MiB for its working memory at this context. Add a laptop with more "
        "free memory, or use a smaller quantization."]
    return NoFit(needed, usable, largest, reasons, options.slots, largest_slots)


def most_slots(mode: str, shape: ModelShape, head: Machine, laptops: list[Machine], options: Options,
               manual: list[int] | None = None) -> Plan | None:
    """The plan with the most of SLOT_CHOICES slots that fits at the context asked (None: not even one)."""
    for slots in SLOT_CHOICES:
        found = plan_mode(mode, shape, head, laptops, options.with_(slots=slots), manual)
        if found:
            return found
    return None
