"""Which transformer layers go on which machine: pure functions, numbers in, a plan out.

The pipeline is the one llama.cpp builds from `n_gpu_layers` and `tensor_split`:
the head's CPU holds the token embedding and the first `head_layers` blocks;
then each RPC device, in registration order, holds a contiguous run; the last
one also holds the output layer (which llama.cpp counts as layer `n_layer`).
The time for one generated token is modelled as the bytes each machine must
read divided by its memory bandwidth, plus a cost per network hop; "fastest"
minimises it subject to every machine fitting in its usable memory.
"""

from collections import deque
from dataclasses import dataclass, replace
from itertools import accumulate, permutations

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
    max_laptops: int = 64  # devices one llama.cpp context may hold besides the head's CPU, as built
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


def prefix_bytes(shape: ModelShape, options: Options) -> tuple[list[int], list[int]]:
    """Running sums over the units (each block, then the output layer): bytes held in memory, bytes one token
    of one sequence reads. A stage's weights and KV cache are then a difference of two sums."""
    kv = kv_bytes_per_layer(shape, options)  # a multiple of slots: a stream per slot
    held = [*(size + kv for size in shape.layer_bytes), shape.output_bytes]
    read = [*(size + kv // options.slots for size in shape.layer_bytes), shape.output_bytes]
    return list(accumulate(held, initial=0)), list(accumulate(read, initial=0))


class Search:
    """The fastest split for many orderings at once. A stage's time and memory are sums over its units plus a
    constant, so for each end point the best start is the cheapest in a window of starts that fit, and a
    window's minimum slides along in one pass: O(units) per machine, not O(units²) stage sums. Orderings that
    share a prefix share its rows (every prefix of the fastest laptops is one pass)."""

    def __init__(self, shape: ModelShape, head: Machine, laptops: list[Machine], options: Options) -> None:
        self.laptops, self.total = laptops, shape.n_layer + 1
        self.held, self.read = prefix_bytes(shape, options)
        self.fixed = options.calibration.server_base + layer_compute_bytes(shape, options)
        self.rows: dict[tuple[int, ...], tuple[list[float], list[int]]] = {(): self.head_row(shape, head, options)}

    def head_row(self, shape: ModelShape, head: Machine, options: Options) -> tuple[list[float], list[int]]:
        """Seconds for the head holding its embedding and 0, 1, … units (inf where it does not fit)."""
        row = [INF] * (self.total + 1)
        for count in range(self.total + 1 if options.head_may_hold_layers else 1):
            memory = stage_memory(shape, 0, count, options, is_head=True)
            if memory.total > head.usable_bytes:
                break  # more layers only need more memory
            row[count] = stage_seconds(memory, head, False, options.slots)
        return row, [0] * (self.total + 1)

    def row(self, order: tuple[int, ...]) -> list[float]:
        """Least seconds with units 0..e−1 placed on the head then `order`, every laptop holding one at least."""
        if order not in self.rows:
            before, machine = self.row(order[:-1]), self.laptops[order[-1]]
            self.rows[order] = self.step(before, machine)
        return self.rows[order][0]

    def step(self, before: list[float], machine: Machine) -> tuple[list[float], list[int]]:
        rate, room = machine.bandwidth_gb_s * 1e9, machine.usable_bytes - self.fixed
        held, read = self.held, self.read
        row, start, window, lo = [INF] * (self.total + 1), [0] * (self.total + 1), deque(), 0
        for end in range(1, self.total + 1):
            value = before[end - 1] - read[end - 1] / rate
            while window and window[-1][0] >= value:
                window.pop()
            window.append((value, end - 1))
            while lo < end and held[end] - held[lo] > room:
                lo += 1
            while window and window[0][1] < lo:
                window.popleft()
            if window and window[0][0] < INF:
                row[end], start[end] = window[0][0] + read[end] / rate + machine.hop_s, window[0][1]
        return row, start

    def counts(self, order: tuple[int, ...]) -> list[int]:
        """The head's then each laptop's units, read back along the starts the passes chose."""
        counts, end = [], self.total
        for size in range(len(order), 0, -1):
            begin = self.rows[order[:size]][1][end]
            counts.append(end - begin)
            end = begin
        return [end, *reversed(counts)]


INF = float("inf")


def orderings(laptops: list[Machine], exhaustive_up_to: int = 5, most: int | None = None):
    """Laptop indices: every subset in every order for a few laptops; for more, subsets of the fastest, in their
    order and roomiest last (it holds the output). Never more than `most` laptops."""
    most = len(laptops) if most is None else min(len(laptops), most)
    if len(laptops) <= exhaustive_up_to:
        for size in range(0, most + 1):
            yield from permutations(range(len(laptops)), size)
        return
    # Among laptops alike in speed, the nearest first (a hop costs every token), then the roomiest: the list
    # order alone decided it before, and a plan then changed when laptops were listed in another order.
    fastest = sorted(range(len(laptops)), key=lambda i: (-laptops[i].bandwidth_gb_s, laptops[i].hop_s,
                                                         -laptops[i].usable_bytes))
    for size in range(0, most + 1):
        chosen = fastest[:size]
        yield tuple(chosen)
        yield tuple(sorted(chosen, key=lambda i: laptops[i].usable_bytes))


def plan_fastest(shape: ModelShape, head: Machine, laptops: list[Machine], options: Options) -> Plan | None:
    """The fastest of the splits over the orderings considered (see `orderings`)."""
    search = Search(shape, head, laptops, options)
    best, best_order = INF, None
    for order in orderings(laptops, most=options.max_laptops):
        seconds = search.row(order)[search.total]
        if seconds < best:
            best, best_order = seconds, order
    if best_order is None:
        return None
    return build("fastest", shape, head, [laptops[i] for i in best_order], search.counts(best_order), options)


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
