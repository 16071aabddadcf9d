"""The seed articles' own scenarios, planned by the panel's planner on sparse GGUF files of the real models.

Each scenario writes its model with bench/sparse_gguf.py (real tensor table, no weights), reads it with the
panel's GGUF reader (models_app/gguf/meta.py), and plans it in-process with models_app/planning/planner.py over laptops
described by numbers only, as `planning.make_plan` would pass them: usable memory = what the laptop has
available minus the panel's default reserve of 1 GiB (nodes.models.Node.usable_bytes), the head holding the
token embedding and no layers (make_plan's default). Per laptop it prints layers, weights, KV cache, compute
buffer, the rpc-server's own memory, the total and the usable memory; where nothing fits, the planner's refusal
and, for the even split, which laptop is over and by how much.

With --llama it also asks llama.cpp itself (bench/llama_sizes.py: the head's wheel loads each sparse file with
`no_alloc`, metadata only, allocations simulated) what it would allocate: for each plan, over as many local
rpc-servers of the laptops' runtime, each device's compute buffer against the planner's; and for the whole
model on one CPU device, its KV cache, recurrent state and compute buffer.

    .venv/bin/python bench/seed_scenarios.py [--ctx 2048] [--only qwen-4x16] [--llama]
"""

import argparse
import contextlib
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere

from bench.llama_sizes import llama_says, local_rpc_servers  # noqa: E402
from bench.sparse_gguf import MODELS, write_sparse  # noqa: E402
from models_app.gguf.meta import read_metadata  # noqa: E402
from models_app.planning import fit, planner  # noqa: E402

GiB = 2**30
MiB = 2**20
RESERVE = 1 * GiB  # nodes.models.Node.memory_reserve's default
HEAD_RESERVE = 2 * GiB  # settings.HEAD_MEMORY_RESERVE's default
HOP_S = 4 * 0.0003  # planning.ROUND_TRIPS_PER_TOKEN round trips of 0.3 ms on a switched 1 Gbit LAN
MODES = ("fastest", "memory", "even")


@dataclass(frozen=True)
class Laptop:
    """A kind of laptop: what the kernel reports available after an idle Ubuntu Server boot, and the memory
    bandwidth llama.cpp gets from it (the panel measures this; here it is assumed)."""
    label: str
    available_gib: float
    bandwidth_gb_s: float

    def machines(self, count: int, prefix: str) -> list[planner.Machine]:
        usable = round(self.available_gib * GiB) - RESERVE
        return [planner.Machine(f"{prefix}-{i}", usable, self.bandwidth_gb_s, HOP_S) for i in range(1, count + 1)]


LAPTOP_16 = Laptop("16 GB laptop (DDR4, 4 cores)", 14.8, 8.0)
LAPTOP_8 = Laptop("8 GB Intel laptop (DDR4, 4 cores)", 7.0, 6.0)
OLD_8 = Laptop("old 8 GB laptop (DDR3, 2 cores, AVX2)", 6.8, 3.0)
HEAD = planner.Machine("head", round(14.5 * GiB) - HEAD_RESERVE, 8.0)  # the panel's own 16 GB machine


@dataclass(frozen=True)
class Scenario:
    key: str
    model: str
    laptop: Laptop
    count: int
    source: str  # what the article says about it

    @property
    def title(self) -> str:
        return f"{MODELS[self.model].title} Q4_K_M over {self.count} × {self.laptop.label}"


SCENARIOS = (
    Scenario("qwen-4x16", "qwen2.5-72b", LAPTOP_16, 4, "001 reports 4 nodes, 12-15 GB per node, 48-60 GB in all"),
    Scenario("qwen-3x16", "qwen2.5-72b", LAPTOP_16, 3, "one laptop fewer than the four of 001"),
    Scenario("llama-39x8", "llama-3-70b", LAPTOP_8, 39, "000 splits a 70B over 39 Intel laptops, about 2 layers each"),
    Scenario("next-4xold", "qwen3-next-80b", OLD_8, 4, "001 calls 4 × 8 GB = 32 GB 'the baseline for a "
             "quantized 80B'"),
    Scenario("next-12xold", "qwen3-next-80b", OLD_8, 12, "001 asks for old laptops of 8 GB or more, AVX2 better"),
)


def shape_for(model: str, folder: Path) -> planner.ModelShape:
    path = folder / f"{model}.gguf"
    if not path.exists():
        write_sparse(MODELS[model], path)
    return planner.shape_of(read_metadata(path))


def gib(value: int) -> str:
    return f"{value / GiB:.2f}"


def layer_range(stage: planner.Stage, n_layer: int) -> str:
    if not stage.count:
        return "embedding only" if stage.machine.name == "head" else "none"
    blocks = range(stage.first, min(stage.first + stage.count, n_layer))
    ends = f"{blocks.start}–{blocks.stop - 1}" if len(blocks) > 1 else f"{blocks.start}"
    text = f"{ends} ({len(blocks)})" if blocks else ""
    return f"{text} + output" if stage.first + stage.count > n_layer else text


def stage_row(stage: planner.Stage, n_layer: int) -> str:
    memory, usable = stage.memory, stage.machine.usable_bytes
    spare = usable - memory.total
    verdict = f"{gib(spare)} free" if spare >= 0 else f"**over by {gib(-spare)}**"
    return (f"| {stage.machine.name} | {layer_range(stage, n_layer)} | {gib(memory.weights)} | "
            f"{gib(memory.kv_cache)} | {gib(memory.compute)} | {gib(memory.overhead)} | {gib(memory.total)} | "
            f"{gib(usable)} | {verdict} |")


def table(stages, n_layer: int) -> list[str]:
    rows = [row for run in runs(stages, n_layer) for row in group_rows(run, n_layer)]
    return ["| machine | layers | weights | KV cache | compute | server | total | usable | |",
            "|---|---|--:|--:|--:|--:|--:|--:|---|", *rows]


def runs(stages, n_layer: int) -> list[list[planner.Stage]]:
    """Stages in pipeline order, neighbours with the same number of layers together (39 rows do not read);
    the stage with the output layer stays alone."""
    grouped: list[list[planner.Stage]] = []
    for stage in stages:
        joins = grouped and grouped[-1][-1].count == stage.count and stage.first + stage.count <= n_layer
        if joins:
            grouped[-1].append(stage)
        else:
            grouped.append([stage])
    return grouped


def group_rows(run: list[planner.Stage], n_layer: int) -> list[str]:
    """A row per stage, or one for a run of three or more alike."""
    if len(run) < 3:
        return [stage_row(stage, n_layer) for stage in run]
    first, last = run[0], run[-1]

    def spread(values) -> str:
        low, high = min(values), max(values)
        return gib(low) if gib(low) == gib(high) else f"{gib(low)}–{gib(high)}"
    spare = min(s.machine.usable_bytes - s.memory.total for s in run)
    verdict = f"{gib(spare)} free or more" if spare >= 0 else f"**over by up to {gib(-spare)}**"
    memories = [s.memory for s in run]
    return [(f"| {first.machine.name} … {last.machine.name} ({len(run)}) | {first.first}–{last.first + last.count - 1}"
            f" ({first.count} each) | {spread([m.weights for m in memories])} | "
            f"{spread([m.kv_cache for m in memories])} | {spread([m.compute for m in memories])} | "
            f"{spread([m.overhead for m in memories])} | {spread([m.total for m in memories])} | "
            f"{spread([s.machine.usable_bytes for s in run])} | {verdict} |")]


def even_stages(shape: planner.ModelShape, laptops: list[planner.Machine],
                options: planner.Options) -> list[planner.Stage]:
    """The even split's stages whether or not they fit (planner.build stops at the first that does not)."""
    counts = [0, *planner.proportional_counts(shape.n_layer + 1, [1.0] * len(laptops))]
    stages, first = [], 0
    for index, (machine, count) in enumerate(zip([HEAD, *laptops], counts, strict=True)):
        stages.append(planner.Stage(machine, first, count,
                                    planner.stage_memory(shape, first, count, options, is_head=index == 0)))
        first += count
    return stages


def summary(plan: planner.Plan, seconds: float) -> str:
    used = sum(1 for stage in plan.stages[1:] if stage.count)
    peak = max(stage.memory.total for stage in plan.stages[1:])
    return (f"{plan.mode}: {used} of its laptops hold layers, the fullest needs {gib(peak)} GiB; "
            f"the planner's estimate {plan.tokens_per_second:.2f} tokens/s ({1000 * plan.seconds_per_token:.0f} "
            f"ms/token), bottleneck {plan.bottleneck}; planned in {seconds:.1f} s.")


def plan_lines(mode: str, shape, laptops, options, seen: dict, check=None) -> list[str]:
    """`seen`: the splits printed already, by tensor_split, so equal laptops do not print one table twice.
    `check`: a plan in, lines on what llama.cpp itself would allocate for it out (--llama)."""
    started = time.monotonic()
    plan = planner.plan_mode(mode, shape, HEAD, laptops, options)
    seconds = time.monotonic() - started
    if plan is None:
        return [f"{mode}: no plan ({seconds:.1f} s)."]
    if plan.tensor_split in seen:
        return [f"{mode}: the same split as {seen[plan.tensor_split]} (planned in {seconds:.1f} s)."]
    seen[plan.tensor_split] = mode
    shown = [stage for i, stage in enumerate(plan.stages) if i == 0 or stage.count]
    return [summary(plan, seconds), "", *table(shown, shape.n_layer), *(check(plan) if check else [])]


def llama_check(plan: planner.Plan, path: Path, ctx: int, ports: list[int]) -> list[str]:
    """llama.cpp's own buffers for this split, over local rpc-servers, against the planner's terms."""
    laptops = [stage for stage in plan.stages[1:] if stage.count]
    try:
        said = llama_says(path, ctx, plan.tensor_split, ports[:len(laptops)])
    except RuntimeError as exc:
        return ["", f"llama.cpp could not size this split: {exc}"]
    devices = said["devices"]
    over = [stage.machine.name for stage, mib in zip(laptops, devices, strict=True)
            if stage.memory.total - stage.memory.compute + mib * MiB > stage.machine.usable_bytes]
    planned = [stage.memory.compute / MiB for stage in laptops]
    state = said["KV cache"] + said["recurrent state"]
    inner = devices[:-1] or devices
    return ["", f"llama.cpp (no_alloc, {len(laptops)} rpc-servers): compute buffers {min(inner):.0f}–"
            f"{max(inner):.0f} MiB on the laptops before the last, {devices[-1]:.0f} MiB on the last (it holds the "
            f"output layer), "
            f"{said['compute buffer']:.0f} MiB on the head; KV cache and recurrent state {state:.0f} MiB in all. "
            f"The planner: {min(planned):.0f}–{max(planned):.0f} MiB per laptop, "
            f"{plan.stages[0].memory.compute / MiB:.0f} on the head, {plan.kv_cache / MiB:.0f} MiB of KV. "
            f"With llama.cpp's buffers in place of the planner's, {len(over)} laptops would be over their usable "
            f"memory{': ' + ', '.join(over) if over else ''}."]


def refusal_lines(shape, laptops, options) -> list[str]:
    why = fit.explain_no_fit(shape, HEAD, laptops, options).explain()
    return [f"Refused: {why}", "", "The even split, laptop by laptop:", "",
            *table(even_stages(shape, laptops, options), shape.n_layer)]


def run(scenario: Scenario, folder: Path, ctx: int, ports: list[int] | None = None) -> list[str]:
    """`ports`: rpc-servers to ask llama.cpp on about each plan (--llama), else None."""
    shape = shape_for(scenario.model, folder)
    laptops = scenario.laptop.machines(scenario.count, scenario.key.split("-")[0])
    options = planner.Options(ctx=ctx, slots=1, head_may_hold_layers=False)
    lines = [f"### {scenario.title}", "", f"From the seeds: {scenario.source}. Model: {shape.n_layer} layers, "
             f"{gib(sum(shape.layer_bytes) + shape.output_bytes + shape.token_embd_bytes)} GiB of tensors; "
             f"each laptop {gib(laptops[0].usable_bytes)} GiB usable; context {ctx} tokens, 1 slot.", ""]
    if planner.plan_mode("even", shape, HEAD, laptops, options) is None and \
            planner.plan_mode("fastest", shape, HEAD, laptops, options) is None:
        return [*lines, *refusal_lines(shape, laptops, options), ""]
    seen: dict = {}
    path = folder / f"{scenario.model}.gguf"
    check = (lambda plan: llama_check(plan, path, ctx, ports)) if ports else None
    for mode in MODES:
        lines += [*plan_lines(mode, shape, laptops, options, seen, check), ""]
    return lines


def llama_lines(folder: Path, ctx: int) -> list[str]:
    options = planner.Options(ctx=ctx, slots=1, head_may_hold_layers=False)
    lines = [f"### What llama.cpp itself would allocate, against the planner (context {ctx}, 1 slot)", "",
             "| model | KV cache: llama.cpp | planner | recurrent state: llama.cpp | planner | "
             "compute buffer, one device: llama.cpp | planner, per laptop |", "|---|--:|--:|--:|--:|--:|--:|"]
    for key in MODELS:
        shape = shape_for(key, folder)
        said = llama_says(folder / f"{key}.gguf", ctx)
        kv = planner.kv_bytes_per_layer(shape, options) * shape.n_layer / MiB
        compute = planner.layer_compute_bytes(shape, options) / MiB
        lines.append(f"| {MODELS[key].title} | {said['KV cache']:.0f} MiB | {kv:.0f} MiB | "
                     f"{said['recurrent state']:.0f} MiB | 0 MiB | {said['compute buffer']:.0f} MiB | "
                     f"{compute:.0f} MiB |")
    return [*lines, ""]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ctx", type=int, default=2048, help="tokens of context (the articles use -c 2048)")
    parser.add_argument("--only", choices=[s.key for s in SCENARIOS], action="append")
    parser.add_argument("--llama", action="store_true", help="also ask llama.cpp what it would allocate")
    args = parser.parse_args(argv)
    chosen = [s for s in SCENARIOS if not args.only or s.key in args.only]
    with tempfile.TemporaryDirectory(prefix="seed-scenarios-") as folder, contextlib.ExitStack() as stack:
        ports = None
        if args.llama:
            runtime = Path(folder) / "runtime"
            runtime.mkdir()
            ports = stack.enter_context(local_rpc_servers(max(s.count for s in chosen), runtime))
        for scenario in chosen:
            print("\n".join(run(scenario, Path(folder), args.ctx, ports)), flush=True)
        if args.llama:
            print("\n".join(llama_lines(Path(folder), args.ctx)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
