"""Which transformer layers go on which machine: pure functions, numbers in, a plan out.

The pipeline is the one llama.cpp builds from `n_gpu_layers` and `tensor_split`:
the head's CPU holds the token embedding and the first `head_layers` blocks;
then each RPC device, in registration order, holds a contiguous run; the last
one also holds the output layer (which llama.cpp counts as layer `n_layer`).
The time for one generated token is modelled as the bytes each machine must
read divided by its memory bandwidth, plus a cost per network hop; "fastest"
minimises it subject to every machine fitting in its usable memory.
"""

from dataclasses import dataclass, field, replace
from itertools import permutations

MiB = 2**20
GiB = 2**30
SLOT_CHOICES = (8, 4, 2, 1)  # what a deployment is offered when nobody chooses: the most that fit


@dataclass(frozen=True)
class ModelShape:
    layer_bytes: tuple[int, ...]
    token_embd_bytes: int
    output_bytes: int
    n_embd: int
    n_head: int
    n_head_kv: int
    vocab_size: int
    n_ff: int = 0  # feed-forward width; 0 when the file does not say (then 4 × n_embd)

    @property
    def n_layer(self) -> int:
        return len(self.layer_bytes)

    @property
    def ff_width(self) -> int:
        return self.n_ff or 4 * self.n_embd


@dataclass(frozen=True)
class Machine:
    name: str
    usable_bytes: int
    bandwidth_gb_s: float  # effective memory bandwidth, measured
    hop_s: float = 0.0  # network cost per token of reaching it (0 for the head)


@dataclass(frozen=True)
class Calibration:
    """Bytes llama.cpp keeps resident beyond weights and KV cache, at its peak: a micro-batch of n_ubatch
    tokens at a full context (u = n_ubatch tokens, c = context, h = heads, e = embedding, f = feed-forward).

    Fitted by least squares to resident memory measured with llama.cpp itself (rpc-server RSS, the head's
    growth) for three models at contexts 512 to 4096: `bench/memory_calibration.py` measures and fits;
    the measurements are kept in tests/models_app/fixtures/memory_measurements.json and
    tests/models_app/test_memory_calibration.py holds these numbers to them.
    """
    server_base: int = round(4.5 * MiB)  # an idle rpc-server
    attention: float = 7.28  # per u·c·h: attention scores (f32) and their f16 copy
    feed_forward: float = 4.06  # per u·f
    hidden: float = 32.4  # per u·e: the activations of one layer
    head_base: int = round(8.3 * MiB)  # llama.cpp's own structures in the head process (vocabulary, context)
    head_mask: float = 20.4  # per u·c: the attention mask and its copies for each device
    head_hidden: float = 47.0  # per u·e: embeddings of the batch


CALIBRATION = Calibration()


@dataclass(frozen=True)
class Options:
    """`ctx`: the tokens each sequence may hold; `slots`: sequences at once. The engine's context holds
    `slots` × `ctx` tokens, each sequence in its own KV stream (kv_unified off)."""
    ctx: int = 4096
    slots: int = 1
    kv_bytes: int = 2  # f16 cache
    n_ubatch: int = 512
    head_may_hold_layers: bool = True
    calibration: Calibration = CALIBRATION

    @property
    def ubatch(self) -> int:
        """llama.cpp never makes a micro-batch longer than the context."""
        return min(self.n_ubatch, self.ctx * self.slots)

    @property
    def stream(self) -> int:
        """The cells of one sequence's KV stream: llama.cpp pads the whole context, then each stream, to 256."""
        return pad(pad(self.ctx * self.slots, 256) // self.slots, 256)

    def with_(self, **changes) -> "Options":
        return replace(self, **changes)


def pad(value: int, to: int) -> int:
    return (value + to - 1) // to * to


@dataclass(frozen=True)
class Memory:
    weights: int
    kv_cache: int
    compute: int
    overhead: int

    @property
    def total(self) -> int:
        return self.weights + self.kv_cache + self.compute + self.overhead


@dataclass(frozen=True)
class Stage:
    machine: Machine
    first: int  # first layer index
    count: int  # layers, the output layer (index n_layer) included when last
    memory: Memory

    @property
    def layers(self) -> range:
        return range(self.first, self.first + self.count)


@dataclass(frozen=True)
class Plan:
    mode: str
    stages: tuple[Stage, ...]  # the head first (maybe with 0 layers), then laptops in order
    seconds_per_token: float
    bottleneck: str
    n_gpu_layers: int
    tensor_split: tuple[int, ...]
    ctx: int = 0  # tokens each slot may hold
    slots: int = 1

    @property
    def tokens_per_second(self) -> float:
        """One person's speed, alone on the deployment."""
        return 1 / self.seconds_per_token if self.seconds_per_token else 0.0

    @property
    def kv_cache(self) -> int:
        return sum(stage.memory.kv_cache for stage in self.stages)


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


def shape_of(meta) -> ModelShape:
    """The planner's view of a model, from its GGUF metadata (a ModelMetadata or a GgufModel)."""
    others = meta.other_tensors
    embedding = sum(size for name, size in others.items() if name.startswith("token_embd"))
    output = sum(size for name, size in others.items() if not name.startswith("token_embd"))
    if "output.weight" not in others:
        output += others.get("token_embd.weight", 0)  # tied embeddings: llama.cpp copies them to the last device
    return ModelShape(tuple(meta.layer_bytes), embedding, output, meta.n_embd, meta.n_head, meta.n_head_kv,
                      meta.vocab_size, getattr(meta, "n_ff", 0) or 0)


def device_names(plan: "Plan") -> list[str]:
    """The device llama.cpp logs for each layer under this plan: CPU for the head, RPCk for laptop k."""
    return [("CPU" if i == 0 else f"RPC{i - 1}") for i, stage in enumerate(plan.stages) for _ in stage.layers]


def kv_bytes_per_layer(shape: ModelShape, options: Options) -> int:
    """Keys and values of every slot's stream."""
    head_dim = shape.n_embd // max(shape.n_head, 1)
    return 2 * options.stream * options.slots * head_dim * shape.n_head_kv * options.kv_bytes


def layer_compute_bytes(shape: ModelShape, options: Options) -> int:
    """What a machine holding layers touches at its peak: a full micro-batch at a full context.
    The logits are one row per sequence (only the last token's are asked for), so they add nearly nothing.
    Slots do not change it: with a KV stream per sequence, llama.cpp splits a micro-batch's u tokens among
    the streams and each attends to its own stream only, so the scores stay u × (one stream) × heads."""
    c, u = options.calibration, options.ubatch
    return round(u * (c.attention * options.stream * shape.n_head + c.feed_forward * shape.ff_width
                      + c.hidden * shape.n_embd))


def head_compute_bytes(shape: ModelShape, options: Options) -> int:
    """The head's part when it holds no layers: the batch's embeddings, the mask, and the logits it reads
    (a row for each slot)."""
    c, u = options.calibration, options.ubatch
    return (round(u * (c.head_mask * options.stream + c.head_hidden * shape.n_embd))
            + shape.vocab_size * 4 * options.slots)


def stage_memory(shape: ModelShape, first: int, count: int, options: Options, is_head: bool) -> Memory:
    blocks = range(first, min(first + count, shape.n_layer))
    holds_output = first + count > shape.n_layer
    weights = sum(shape.layer_bytes[i] for i in blocks) + (shape.output_bytes if holds_output else 0)
    calibration = options.calibration
    if is_head:
        weights += shape.token_embd_bytes
        compute = head_compute_bytes(shape, options) + (layer_compute_bytes(shape, options) if count else 0)
        overhead = calibration.head_base
    else:
        compute = layer_compute_bytes(shape, options) if count else 0
        overhead = calibration.server_base if count else 0
    return Memory(weights, kv_bytes_per_layer(shape, options) * len(blocks), compute, overhead)


def stage_seconds(memory: Memory, machine: Machine, used: bool, slots: int = 1) -> float:
    """One token of one sequence: the weights and that sequence's own KV stream are read."""
    read = memory.weights + memory.kv_cache // slots
    return read / (machine.bandwidth_gb_s * 1e9) + (machine.hop_s if used else 0.0)


def build(mode: str, shape: ModelShape, head: Machine, order: list[Machine], counts: list[int],
          options: Options) -> Plan | None:
    """The plan for `counts` layers on head then `order`; None if a machine does not fit."""
    stages, first = [], 0
    for index, (machine, count) in enumerate(zip([head, *order], counts, strict=True)):
        memory = stage_memory(shape, first, count, options, is_head=index == 0)
        if memory.total > machine.usable_bytes:
            return None
        stages.append(Stage(machine, first, count, memory))
        first += count
    times = [stage_seconds(s.memory, s.machine, s.count > 0 and i > 0, options.slots) for i, s in enumerate(stages)]
    slowest = max(range(len(stages)), key=lambda i: times[i])
    return Plan(mode, tuple(stages), sum(times), stages[slowest].machine.name,
                n_gpu_layers=shape.n_layer + 1 - counts[0], tensor_split=tuple(counts[1:]), ctx=options.ctx,
                slots=options.slots)


def best_counts(shape: ModelShape, head: Machine, order: list[Machine], options: Options) -> Plan | None:
    """Dynamic programme over split points for one ordering: the cheapest contiguous runs that fit."""
    total, machines = shape.n_layer + 1, [head, *order]
    best: dict[tuple[int, int], tuple[float, list[int]]] = {(0, 0): (0.0, [])}
    for index, machine in enumerate(machines):
        minimum = 0 if index == 0 else 1
        most = total if index > 0 or options.head_may_hold_layers else 0
        reached = {}
        for (m, done), (cost, counts) in best.items():
            if m != index:
                continue
            for count in range(minimum, min(most, total - done) + 1):
                if index == len(machines) - 1 and done + count != total:
                    continue
                memory = stage_memory(shape, done, count, options, is_head=index == 0)
                if memory.total > machine.usable_bytes:
                    break  # more layers only need more memory
                step = cost + stage_seconds(memory, machine, count > 0 and index > 0, options.slots)
                key = (index + 1, done + count)
                if key not in reached or step < reached[key][0]:
                    reached[key] = (step, [*counts, count])
        best.update(reached)
    final = best.get((len(machines), total))
    return build("fastest", shape, head, order, final[1], options) if final else None


def orderings(laptops: list[Machine], exhaustive_up_to: int = 5):
    """Every subset in every order for a few laptops; for more, subsets of the fastest, in a few orders."""
    if len(laptops) <= exhaustive_up_to:
        for size in range(0, len(laptops) + 1):
            yield from (list(p) for p in permutations(laptops, size))
        return
    fastest = sorted(laptops, key=lambda m: -m.bandwidth_gb_s)
    for size in range(0, len(laptops) + 1):
        chosen = fastest[:size]
        yield chosen
        yield sorted(chosen, key=lambda m: m.usable_bytes)  # roomiest last: it holds the output


def plan_fastest(shape: ModelShape, head: Machine, laptops: list[Machine], options: Options) -> Plan | None:
    plans = (best_counts(shape, head, order, options) for order in orderings(laptops))
    return min((plan for plan in plans if plan), key=lambda plan: plan.seconds_per_token, default=None)


def proportional_counts(total: int, weights: list[float]) -> list[int]:
    """`total` split in proportion to `weights`, every share at least 1, summing exactly to `total`."""
    raw = [total * w / sum(weights) for w in weights]
    counts = [max(1, int(r)) for r in raw]
    while sum(counts) > total:
        counts[counts.index(max(counts))] -= 1
    for i in sorted(range(len(raw)), key=lambda i: raw[i] - int(raw[i]), reverse=True):
        if sum(counts) == total:
            break
        counts[i] += 1
    return counts


def plan_mode(mode: str, shape: ModelShape, head: Machine, laptops: list[Machine], options: Options,
              manual: list[int] | None = None) -> Plan | None:
    """"fastest", or for comparison "memory" (split by usable memory, as llama.cpp, exo and GPUStack do),
    "even", or "manual" with `manual` = layers for the head, then each laptop (the output layer counts)."""
    if mode == "fastest":
        return plan_fastest(shape, head, laptops, options)
    total = shape.n_layer + 1
    if mode == "manual":
        if not manual or len(manual) != len(laptops) + 1 or sum(manual) != total or min(manual[1:], default=1) < 1:
            return None
        counts = manual
    elif not laptops:
        if not options.head_may_hold_layers:
            return None
        counts = [total]
    else:
        weights = [m.usable_bytes for m in laptops] if mode == "memory" else [1.0] * len(laptops)
        counts = [0, *proportional_counts(total, weights)]
    return build(mode, shape, head, laptops, counts, options)


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


def placement(n_layer: int, n_gpu_layers: int, tensor_split: tuple[int, ...]) -> list[int]:
    """Where llama.cpp puts each layer (0..n_layer, the last being the output): -1 the head's CPU,
    k the k-th RPC device. Mirrors llama_model::load_tensors in the vendored llama.cpp."""
    i_gpu_start = max(n_layer + 1 - n_gpu_layers, 0)
    act = min(n_gpu_layers, n_layer + 1)
    total = sum(tensor_split)
    cumulative, running = [], 0.0
    for value in tensor_split:
        running += value
        cumulative.append(running / total)
    where = []
    for il in range(n_layer + 1):
        if il < i_gpu_start or (il - i_gpu_start) >= act:
            where.append(-1)
            continue
        position = float(il - i_gpu_start) / act
        where.append(next((k for k, c in enumerate(cumulative) if c > position), len(cumulative) - 1))
    return where
