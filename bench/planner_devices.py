"""The planner alone with laptops of one device against laptops of two (a GPU and the CPU), side by side.

An 80-layer model of about 1 GiB (the issue-22 lab's) over 8, 16, 39 and 64 laptops of 2 GiB RAM, one in
three slower; the GPU laptops add a GPU of 1 GiB at four times the CPU's speed. Every mode, each size measured
alternately CPU-only then with GPUs, `--rounds` times; medians in milliseconds, and what the plans give.

    .venv/bin/python bench/planner_devices.py [--rounds 5]
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clusterpanel.settings")

from models_app.planning import planner  # noqa: E402

GiB, MiB = 2**30, 2**20
SIZES = (8, 16, 39, 64)
MODES = ("fastest", "memory", "even")


def shape() -> planner.ModelShape:
    return planner.ModelShape(tuple([12 * MiB] * 80), 64 * MiB, 64 * MiB, 2048, 16, 4, 32000, 5632)


def laptops(count: int, gpus: bool) -> list[planner.Machine]:
    found = []
    for i in range(count):
        speed = 3.0 if i % 3 == 2 else 6.0
        name = f"lab-{i + 1}"
        if gpus:
            found.append(planner.Machine(name, 1 * GiB, 4 * speed, hop_s=0.0008, device="Vulkan0"))
        found.append(planner.Machine(name, 2 * GiB, speed, hop_s=0.0008))
    return found


def timed(mode: str, machines: list[planner.Machine]) -> tuple[float, planner.Plan | None]:
    options = planner.Options(ctx=2048, max_laptops=64)
    head = planner.Machine("head", 8 * GiB, 10.0)
    started = time.perf_counter()
    plan = planner.plan_mode(mode, shape(), head, machines, options)
    return time.perf_counter() - started, plan


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print("| laptops | mode | CPU only ms | GPU + CPU ms | ratio | CPU only tok/s | GPU + CPU tok/s | devices used |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for size in SIZES:
        for mode in MODES:
            times: dict[bool, list[float]] = {False: [], True: []}
            plans: dict[bool, planner.Plan | None] = {}
            for _ in range(args.rounds):
                for gpus in (False, True):
                    seconds, plans[gpus] = timed(mode, laptops(size, gpus))
                    times[gpus].append(seconds)
            cpu, gpu = (statistics.median(times[g]) * 1000 for g in (False, True))

            def speed(plan: planner.Plan | None) -> str:
                return f"{plan.tokens_per_second:.1f}" if plan else "no fit"

            used = len(plans[True].stages) - 1 if plans[True] else 0
            print(f"| {size} | {mode} | {cpu:.2f} | {gpu:.2f} | {gpu / cpu:.2f} | {speed(plans[False])} | "
                  f"{speed(plans[True])} | {used} |")


if __name__ == "__main__":
    main()
