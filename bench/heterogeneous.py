"""Does the "fastest" plan beat the memory-proportional split on unequal laptops, and how close is it to the
best split there is?

Three simulated laptops on 1 Gbit links; the middle one is slowed by a cgroup CPU quota but has the most
memory (the old desktop in the corner). The panel measures each laptop's speed with llama.cpp, as it does
for real laptops, and plans a qwen2 test model (13 pipeline units: 12 blocks and the output) in three modes.
Then it tries every split of those units that the planner says fits — over the laptops in their given
order and in the order the fastest plan chose, a laptop may get none — measures decode tokens/s of each
once, and finally measures the fastest plan, the memory-proportional plan and the best few splits again
in alternating rounds.

    .venv/bin/python bench/heterogeneous.py [--rounds 3] [--slow-cpus 0.3] [--tokens 32]
"""

import argparse
import statistics
import tempfile
import time
from itertools import product
from pathlib import Path

from lan import bench_lan, with_runtime

MiB = 2**20
USABLE_MIB = (360, 1000, 360)  # the slow laptop is the roomy one
INSTALL_DIR = "~/.clusterpanel"
PORT = 50211
PROMPT = "<|im_start|>user\nTell me about clusters of laptops.<|im_end|>\n<|im_start|>assistant\n"


def prepare_laptops(lan) -> tuple[list, list[float]]:
    from nodes.probing import speed
    from nodes.servers import rpcserver

    targets, speeds = with_runtime(lan, INSTALL_DIR), []
    for node in targets:
        speeds.append(speed.measure(node, INSTALL_DIR)["bandwidth_gb_s"])
        rpcserver.start(node, INSTALL_DIR, PORT, bind=node.host)
    return targets, speeds


Split = tuple[tuple[int, int], ...]  # (laptop index, layers) in pipeline order, laptops with layers only


def tokens_per_s(model: Path, endpoints: list[str], split: Split, tokens: int) -> float:
    from models_app.llamacpp import oneshot

    answer = oneshot.complete([endpoints[i] for i, _ in split], PROMPT, tokens, model=model,
                              n_gpu_layers=sum(c for _, c in split), tensor_split=tuple(c for _, c in split),
                              ctx=512, timeout=600)
    return answer["completion_tokens"] / answer["seconds"]


def plan_of(split: Split, shape, laptops, options):
    from models_app.planning import planner

    head = planner.Machine("head", 1 << 40, 10.0)
    return planner.build("split", shape, head, [laptops[i] for i, _ in split], [0, *(c for _, c in split)],
                         options)


def fitting_splits(shape, laptops, options, order: list[int]) -> list[Split]:
    """Every split of the units over `order` (a laptop may get none) that the planner says fits."""
    total, found = shape.n_layer + 1, []
    for counts in product(range(total + 1), repeat=len(order)):
        split = tuple((i, c) for i, c in zip(order, counts, strict=True) if c)
        if sum(counts) == total and plan_of(split, shape, laptops, options):
            found.append(split)
    return found


def split_of(plan, laptops) -> Split:
    index = {m.name: i for i, m in enumerate(laptops)}
    return tuple((index[s.machine.name], s.count) for s in plan.stages[1:] if s.count)


def label(split: Split, laptops) -> str:
    return " → ".join(f"{laptops[i].name}:{c}" for i, c in split)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--slow-cpus", type=float, default=0.3)
    parser.add_argument("--tokens", type=int, default=32)
    args = parser.parse_args()
    with bench_lan(3, rate="1gbit", cpus={1: args.slow_cpus}) as lan, \
            tempfile.TemporaryDirectory(prefix="hetero-") as scratch:
        from models_app.gguf.meta import read_metadata
        from models_app.planning import planner
        from nodes.servers import rpcserver
        from tests.models_app.gguf_files import write_loadable_model

        model = write_loadable_model(Path(scratch) / "qwen2-12.gguf", layers=12)
        shape = planner.shape_of(read_metadata(model))
        targets, speeds = prepare_laptops(lan)
        try:
            endpoints = [f"{node.host}:{PORT}" for node in targets]
            laptops = [planner.Machine(f"lab-{i + 1}", usable * MiB, speed, 0.0005)
                       for i, (usable, speed) in enumerate(zip(USABLE_MIB, speeds, strict=True))]
            options = planner.Options(ctx=512, head_may_hold_layers=False)
            head = planner.Machine("head", 8 << 30, 10.0)
            plans = {mode: planner.plan_mode(mode, shape, head, laptops, options) for mode in ("fastest", "memory")}
            fastest, memory = split_of(plans["fastest"], laptops), split_of(plans["memory"], laptops)
            splits = fitting_splits(shape, laptops, options, [0, 1, 2])
            chosen_order = [i for i, _ in fastest] + [i for i in range(3) if i not in {i for i, _ in fastest}]
            splits += [s for s in fitting_splits(shape, laptops, options, chosen_order) if s not in splits]
            print(f"speeds measured (GB/s): {speeds}; fastest {label(fastest, laptops)}, memory-proportional "
                  f"{label(memory, laptops)}; {len(splits)} splits fit", flush=True)
            started, sweep = time.monotonic(), {}
            for split in splits:
                sweep[split] = tokens_per_s(model, endpoints, split, args.tokens)
            print(f"sweep took {time.monotonic() - started:.0f} s", flush=True)
            candidates = {f"fastest plan: {label(fastest, laptops)}": fastest,
                          f"memory-proportional: {label(memory, laptops)}": memory}
            for split in sorted(sweep, key=sweep.get, reverse=True)[:3]:
                if split not in candidates.values():
                    candidates[f"swept: {label(split, laptops)}"] = split
            rounds = {name: [] for name in candidates}
            for _ in range(args.rounds):
                for name, split in candidates.items():
                    rounds[name].append(tokens_per_s(model, endpoints, split, args.tokens))
        finally:
            for node in targets:
                rpcserver.stop(node, INSTALL_DIR, PORT)
    medians = {label: statistics.median(values) for label, values in rounds.items()}
    best = max(medians.values())
    print(f"\nlab-1 / lab-2 / lab-3: usable {USABLE_MIB} MiB, measured {speeds} GB/s (lab-2 at "
          f"{args.slow_cpus} of a core); qwen2 test model, {shape.n_layer} blocks + output, "
          f"{(sum(shape.layer_bytes) + shape.output_bytes) / MiB:.0f} MiB on the laptops; 1 Gbit links; "
          f"{len(sweep)} splits tried once, then {args.rounds} alternating rounds of {args.tokens} tokens\n")
    print("| split (laptop:layers in pipeline order) | predicted tok/s | sweep tok/s | median tok/s | ratio to best |")
    print("|---|---:|---:|---:|---:|")
    for name, split in candidates.items():
        plan = plan_of(split, shape, laptops, options)
        print(f"| {name} | {plan.tokens_per_second:.1f} | {sweep.get(split, float('nan')):.1f} | "
              f"{medians[name]:.1f} | {medians[name] / best:.2f} |")
    print("\nsweep (every split that fits, one run each):")
    for split, value in sorted(sweep.items(), key=lambda item: -item[1]):
        print(f"  {label(split, laptops)}: {value:.1f} tok/s")

if __name__ == "__main__":
    main()
