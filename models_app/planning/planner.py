"""Which transformer layers go on which device: pure functions, numbers in, a plan out.

The pipeline is the one llama.cpp builds from `n_gpu_layers` and `tensor_split`:
the head's CPU holds the token embedding and the first `head_layers` blocks;
then each RPC device, in registration order, holds a contiguous run; the last
one also holds the output layer (which llama.cpp counts as layer `n_layer`).
A laptop's rpc-server serves the devices of it that hold layers (GPUs first,
its CPU last), each an RPC device of its own: a plan has a stage per device
used, never one holding nothing, and a laptop's devices stay side by side.
The time for one generated token is modelled as the bytes each device must
read divided by its memory bandwidth, plus a cost per network hop (a laptop's
second device costs part of one: split_search.SECOND_DEVICE_HOP); "fastest"
minimises it subject to every device fitting in its usable memory.
"""

from dataclasses import dataclass, replace
from itertools import accumulate

from models_app.planning.split_search import INF, SECOND_DEVICE_HOP, Machine, Search, laptop_groups, orderings

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
class Calibration:
    """Bytes llama.cpp keeps resident beyond weights and KV cache, at its peak: a micro-batch of n_ubatch
    tokens at a full context (u = n_ubatch tokens, c = context, h = heads, e = embedding, f = feed-forward).

    Fitted by least squares to resident memory measured with llama.cpp itself (rpc-server RSS, the head's
    growth) for three models at contexts 512 to 4096: `bench/memory_calibration.py` measures and fits;
    a GPU is predicted with the same numbers as a CPU until GPUs are measured, its server_base included;
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
    max_laptops: int = 64  # RPC devices one llama.cpp context may hold besides the head's CPU, as built
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
    hop_s: float = 0.0  # its share of the network's cost per token: its laptop's hop, or part of it

    @property
    def layers(self) -> range:
        return range(self.first, self.first + self.count)


@dataclass(frozen=True)
class Plan:
    mode: str
    stages: tuple[Stage, ...]  # the head first (maybe with 0 layers), then each device used, in pipeline order
    seconds_per_token: float
    bottleneck: str
    n_gpu_layers: int
    tensor_split: tuple[int, ...]
    ctx: int = 0  # tokens each slot may hold
    slots: int = 1
    left_out: tuple[tuple[Machine, int], ...] = ()  # devices too small for one layer, and the bytes one needs

    @property
    def tokens_per_second(self) -> float:
        """One person's speed, alone on the deployment."""
        return 1 / self.seconds_per_token if self.seconds_per_token else 0.0

    @property
    def kv_cache(self) -> int:
        return sum(stage.memory.kv_cache for stage in self.stages)


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
    """The device llama.cpp logs for each layer under this plan: CPU for the head, RPCk for the k-th device."""
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


def stage_time(stage: Stage, slots: int = 1) -> float:
    """A stage's part of one token of one sequence, its share of the network included."""
    read = stage.memory.weights + stage.memory.kv_cache // slots
    return read / (stage.machine.bandwidth_gb_s * 1e9) + stage.hop_s


def build(mode: str, shape: ModelShape, head: Machine, order: list[Machine], counts: list[int],
          options: Options) -> Plan | None:
    """The plan for `counts` layers on head then the devices of `order` (a device given none is left out of the
    pipeline); None if a device does not fit."""
    stages, first, reached = [], 0, set()
    for index, (machine, count) in enumerate(zip([head, *order], counts, strict=True)):
        if index and not count:
            continue
        memory = stage_memory(shape, first, count, options, is_head=index == 0)
        if memory.total > machine.usable_bytes:
            return None
        hop = 0.0 if not index else machine.hop_s * (SECOND_DEVICE_HOP if machine.name in reached else 1)
        stages.append(Stage(machine, first, count, memory, hop))
        if index:
            reached.add(machine.name)
        first += count
    times = [stage_time(stage, options.slots) for stage in stages]
    slowest = max(range(len(stages)), key=lambda i: times[i])
    return Plan(mode, tuple(stages), sum(times), stages[slowest].machine.name,
                n_gpu_layers=shape.n_layer + 1 - counts[0], tensor_split=tuple(s.count for s in stages[1:]),
                ctx=options.ctx, slots=options.slots)


def prefix_bytes(shape: ModelShape, options: Options) -> tuple[list[int], list[int]]:
    """Running sums over the units (each block, then the output layer): bytes held in memory, bytes one token
    of one sequence reads. A stage's weights and KV cache are then a difference of two sums."""
    kv = kv_bytes_per_layer(shape, options)  # a multiple of slots: a stream per slot
    held = [*(size + kv for size in shape.layer_bytes), shape.output_bytes]
    read = [*(size + kv // options.slots for size in shape.layer_bytes), shape.output_bytes]
    return list(accumulate(held, initial=0)), list(accumulate(read, initial=0))


def device_fixed_bytes(shape: ModelShape, options: Options) -> int:
    """What a device holding layers needs besides them: its server's own memory, its working memory."""
    return options.calibration.server_base + layer_compute_bytes(shape, options)


def one_unit_bytes(shape: ModelShape, options: Options) -> int:
    """The least a device must hold to take part: its smallest unit (a block and its KV cache, or the output
    layer) and its fixed part."""
    kv = kv_bytes_per_layer(shape, options)
    return min([*(size + kv for size in shape.layer_bytes), shape.output_bytes]) + device_fixed_bytes(shape, options)


def usable_devices(shape: ModelShape, laptops: list[Machine],
                   options: Options) -> tuple[list[Machine], tuple[tuple[Machine, int], ...]]:
    """The devices that may hold layers, and those left out, too small for one unit, with what one needs. A
    laptop whose devices are all too small keeps them (it is the laptop that does not fit, and says so)."""
    need, kept, left_out = one_unit_bytes(shape, options), [], []
    for group in laptop_groups(laptops):
        devices = [laptops[i] for i in group]
        roomy = [m.usable_bytes >= need for m in devices]
        kept += [m for m, fits in zip(devices, roomy, strict=True) if fits or not any(roomy)]
        left_out += [(m, need) for m, fits in zip(devices, roomy, strict=True) if any(roomy) and not fits]
    return kept, tuple(left_out)


def head_row(shape: ModelShape, head: Machine, options: Options, total: int) -> list[float]:
    """Seconds for the head holding its embedding and 0, 1, … units (inf where it does not fit)."""
    row = [INF] * (total + 1)
    for count in range(total + 1 if options.head_may_hold_layers else 1):
        memory = stage_memory(shape, 0, count, options, is_head=True)
        if memory.total > head.usable_bytes:
            break  # more layers only need more memory
        row[count] = stage_seconds(memory, head, False, options.slots)
    return row


def search_for(shape: ModelShape, laptops: list[Machine], options: Options, head: Machine | None = None) -> Search:
    held, read = prefix_bytes(shape, options)
    first = head_row(shape, head, options, len(held) - 1) if head else None
    return Search(laptops, held, read, device_fixed_bytes(shape, options), first)


def plan_fastest(shape: ModelShape, head: Machine, laptops: list[Machine], options: Options) -> Plan | None:
    """The fastest of the splits over the orderings considered (see `orderings`). An ordering whose best split
    uses more devices than llama.cpp holds is passed over (only laptops of several devices can)."""
    search = search_for(shape, laptops, options, head)
    best, best_order = INF, None
    for order in orderings(laptops, most=options.max_laptops):
        seconds = search.row(order)[search.total]
        if seconds < best and (len(search.devices(order)) <= options.max_laptops
                               or sum(map(bool, search.counts(order)[1:])) <= options.max_laptops):
            best, best_order = seconds, order
    if best_order is None:
        return None
    return build("fastest", shape, head, search.devices(best_order), search.counts(best_order), options)


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
    "even" (both over every device that can hold a layer), or "manual" with `manual` = layers for the head,
    then each laptop (the output layer counts; see `mode_counts`). Devices too small for one layer are left
    out of every mode and listed in the plan's `left_out`."""
    laptops, left_out = usable_devices(shape, laptops, options)
    if mode == "fastest":
        plan = plan_fastest(shape, head, laptops, options)
    else:
        split = mode_counts(mode, shape, laptops, options, manual)
        plan = split and build(mode, shape, head, laptops, split, options)
    return replace(plan, left_out=left_out) if plan and left_out else plan


def mode_counts(mode: str, shape: ModelShape, laptops: list[Machine], options: Options,
                manual: list[int] | None = None) -> list[int] | None:
    """The head's units then each device's in "memory", "even" or "manual" mode (None: not a split). A manual
    laptop's units go to its devices as fast as they fit (its GPU first when faster and roomy enough); when they
    cannot, all to its last device (the CPU), so that the laptop that does not fit says so."""
    total, groups = shape.n_layer + 1, laptop_groups(laptops)
    if mode != "manual":
        if not laptops:
            return [total] if options.head_may_hold_layers else None
        weights = [m.usable_bytes for m in laptops] if mode == "memory" else [1.0] * len(laptops)
        return [0, *proportional_counts(total, weights)]
    if not manual or len(manual) != len(groups) + 1 or sum(manual) != total or min(manual[1:], default=1) < 1:
        return None
    search, counts = search_for(shape, laptops, options), [manual[0]]
    for laptop, (group, count) in enumerate(zip(groups, manual[1:], strict=True)):
        split = search.fill(laptop, sum(counts), count) if len(group) > 1 else [count]
        counts += split or [0] * (len(group) - 1) + [count]
    return counts


def laptop_stages(plan: Plan) -> list[list[Stage]]:
    """The stages after the head, laptop by laptop (a laptop's devices side by side), in pipeline order."""
    runs: list[list[Stage]] = []
    for stage in plan.stages[1:]:
        if runs and runs[-1][0].machine.name == stage.machine.name:
            runs[-1].append(stage)
        else:
            runs.append([stage])
    return runs


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
