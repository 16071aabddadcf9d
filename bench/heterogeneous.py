"""Does the "fastest" plan beat the memory-proportional split on unequal laptops, and how close is it to the
best split there is?

Three simulated laptops on 1 Gbit links; the middle one is slowed by a cgroup CPU quota but has the most
memory (the old desktop in the corner). The panel measures each laptop's speed with llama.cpp, as it does
for real laptops, and plans a qwen2 test model (13 pipeline units: 12 blocks and the output) in three modes.
Then it tries every split of those units over the laptops in their given order that the planner says
fits (a laptop may get none), measures decode tokens/s of each once, and finally measures the fastest
plan, the memory-proportional plan and the best few splits again in alternating rounds.

    .venv/bin/python bench/heterogeneous.py [--rounds 3] [--slow-cpus 0.3] [--tokens 32]
"""

import argparse
import statistics
import tempfile
import time
from itertools import product
from pathlib import Path

from lan import bench_lan, target

MiB = 2**20
USABLE_MIB = (360, 1000, 360)  # the slow laptop is the roomy one
INSTALL_DIR = "~/.clusterpanel"
PORT = 50211
PROMPT = "<|im_start|>user\nTell me about clusters of laptops.<|im_end|>\n<|im_start|>assistant\n"


def prepare_laptops(lan) -> tuple[list, list[float]]:
    from nodes import install, probe, rpcserver, speed
    from nodes.runtime import find_bundle

    targets, speeds = [], []
    for laptop in lan.laptops:
        node = target(lan, laptop)
        install.install_runtime(node, INSTALL_DIR, find_bundle(), probe.probe(node, INSTALL_DIR),
                                lambda *a, **k: None)
        speeds.append(speed.measure(node, INSTALL_DIR)["bandwidth_gb_s"])
        rpcserver.start(node, INSTALL_DIR, PORT, bind=node.host)
        targets.append(node)
    return targets, speeds


def tokens_per_s(model: Path, endpoints: list[str], counts: tuple[int, ...], tokens: int) -> float:
    from jobs import oneshot

    used = [(endpoint, count) for endpoint, count in zip(endpoints, counts, strict=True) if count]
    answer = oneshot.complete([e for e, _ in used], PROMPT, tokens, model=model, n_gpu_layers=sum(counts),
                              tensor_split=tuple(c for _, c in used), ctx=512, timeout=600)
    return answer["completion_tokens"] / answer["seconds"]


def all_fitting_splits(shape, laptops, options) -> list[tuple[int, ...]]:
    from models_app import planner

    head = planner.Machine("head", 1 << 40, 10.0)
    total = shape.n_layer + 1
    found = []
    for counts in product(range(total + 1), repeat=len(laptops)):
        if sum(counts) != total:
            continue
        used = [(m, c) for m, c in zip(laptops, counts, strict=True) if c]
        if planner.build("split", shape, head, [m for m, _ in used], [0, *(c for _, c in used)], options):
            found.append(counts)
    return found


def plan_counts(plan, laptops) -> tuple[int, ...]:
    """A plan's layers per laptop, in the laptops' given order (0 for a laptop it leaves out)."""
    held = {stage.machine.name: stage.count for stage in plan.stages[1:]}
    return tuple(held.get(m.name, 0) for m in laptops)


def in_order(plan, laptops) -> bool:
    names = [stage.machine.name for stage in plan.stages[1:]]
    return names == [m.name for m in laptops if m.name in names]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--slow-cpus", type=float, default=0.3)
    parser.add_argument("--tokens", type=int, default=32)
    args = parser.parse_args()
    with bench_lan(3, rate="1gbit", cpus={1: args.slow_cpus}) as lan, \
            tempfile.TemporaryDirectory(prefix="hetero-") as scratch:
        from models_app import planner
        from models_app.gguf_meta import read_metadata
        from nodes import rpcserver
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
            assert all(in_order(plan, laptops) for plan in plans.values()), "reorder USABLE_MIB: a plan reorders"
            splits = all_fitting_splits(shape, laptops, options)
            print(f"speeds measured (GB/s): {speeds}; {len(splits)} splits fit", flush=True)
            started, sweep = time.monotonic(), {}
            for counts in splits:
                sweep[counts] = tokens_per_s(model, endpoints, counts, args.tokens)
            print(f"sweep took {time.monotonic() - started:.0f} s", flush=True)
            fastest, memory = plan_counts(plans["fastest"], laptops), plan_counts(plans["memory"], laptops)
            candidates = {f"fastest plan {fastest}": fastest, f"memory-proportional {memory}": memory}
            for counts in sorted(sweep, key=sweep.get, reverse=True)[:3]:
                candidates.setdefault(f"split {counts}", counts)
            rounds = {label: [] for label in candidates}
            for _ in range(args.rounds):
                for label, counts in candidates.items():
                    rounds[label].append(tokens_per_s(model, endpoints, counts, args.tokens))
        finally:
            for node in targets:
                rpcserver.stop(node, INSTALL_DIR, PORT)
    medians = {label: statistics.median(values) for label, values in rounds.items()}
    best = max(medians.values())
    print(f"\nlab-1 / lab-2 / lab-3: usable {USABLE_MIB} MiB, measured {speeds} GB/s (lab-2 at "
          f"{args.slow_cpus} of a core); qwen2 test model, {shape.n_layer} blocks + output, "
          f"{(sum(shape.layer_bytes) + shape.output_bytes) / MiB:.0f} MiB on the laptops; 1 Gbit links; "
          f"{len(sweep)} splits tried once, then {args.rounds} alternating rounds of {args.tokens} tokens\n")
    print("| split (lab-1, lab-2, lab-3) | predicted tok/s | sweep tok/s | median tok/s | ratio to best |")
    print("|---|---:|---:|---:|---:|")
    for label, counts in candidates.items():
        used = [(m, c) for m, c in zip(laptops, counts, strict=True) if c]
        plan = planner.build("split", shape, head, [m for m, _ in used], [0, *(c for _, c in used)], options)
        print(f"| {label} | {plan.tokens_per_second:.1f} | {sweep.get(counts, float('nan')):.1f} | "
              f"{medians[label]:.1f} | {medians[label] / best:.2f} |")
    print("\nsweep (every split that fits, one run each):")
    for counts, value in sorted(sweep.items(), key=lambda item: -item[1]):
        print(f"  {counts}: {value:.1f} tok/s")


if __name__ == "__main__":
    main()
