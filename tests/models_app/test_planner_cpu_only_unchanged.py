"""Laptops with their CPU alone are planned exactly as before devices came into the planner: over 160 random labs
(1 to 39 laptops, speeds and distances often alike, the head holding layers or not), every mode's plan equals
the one recorded with the per-laptop planner of commit b807868, to the last bit of its predicted time.

One difference is deliberate: in "memory" and "even" mode over more laptops than the model has layers, the old
planner listed the laptops left with no layer as stages of their own (a 0 in tensor_split, an rpc-server holding
nothing); a plan now holds only devices with a layer. Those empty stages are taken out of the recorded plans
before comparing; they added nothing to a token's time, and llama.cpp put every layer on the same laptop.

Recorded with `.venv/bin/python -m tests.models_app.test_planner_cpu_only_unchanged` in a tree at that commit."""

import json
import random
import sys
from pathlib import Path

from models_app.planning.planner import Machine, MiB, ModelShape, Options, plan_mode

RECORDED = Path(__file__).parent / "fixtures" / "cpu_only_plans.json"
LABS = 160
MODES = ("fastest", "memory", "even", "manual")


def pick(rng: random.Random, values: list):
    return values[int(rng.random() * len(values))]


def random_lab(seed: int) -> tuple[ModelShape, Machine, list[Machine], Options, list[int]]:
    """A model, a head, laptops, options and a manual split (head first), all from `seed`."""
    rng = random.Random(seed)
    n_layer = pick(rng, [2, 5, 8, 12, 30, 40, 80])
    size = pick(rng, [2, 12, 40, 100])
    same = rng.random() < 0.5
    layer_bytes = tuple(size * MiB if same else int(size * MiB * (0.5 + rng.random())) for _ in range(n_layer))
    shape = ModelShape(layer_bytes, 20 * MiB, pick(rng, [4, 20, 60]) * MiB, 512, 8, 2, 8000)
    count = pick(rng, [1, 2, 3, 4, 5, 6, 7, 9, 12, 20, 39])
    model = sum(layer_bytes) + shape.output_bytes
    laptops = [Machine(f"lab-{i}", int(model / count * (0.3 + 2.5 * rng.random())) + 40 * MiB,
                       pick(rng, [4.0, 8.0, 8.0, 12.5, 20.0, 2 + 30 * rng.random()]),
                       pick(rng, [0.0, 0.0012, 0.0016, 0.0016, 0.002, rng.random() / 500]))
               for i in range(count)]
    head = Machine("head", pick(rng, [60 * MiB, 300 * MiB, model * 2]), pick(rng, [8.0, 20.0]))
    options = Options(ctx=pick(rng, [256, 512, 2048]), slots=pick(rng, [1, 2, 4]), n_ubatch=pick(rng, [64, 512]),
                      head_may_hold_layers=rng.random() < 0.5, max_laptops=pick(rng, [15, 64]))
    cuts = sorted(rng.sample(range(1, n_layer + 1), min(count - 1, n_layer))) if count > 1 else []
    bounds = [0, *cuts, n_layer + 1]
    manual = [0, *(b - a for a, b in zip(bounds, bounds[1:], strict=False))]
    return shape, head, laptops, options, manual


def summary(plan) -> dict | None:
    if plan is None:
        return None
    return {"stages": [[stage.machine.name, stage.first, stage.count] for stage in plan.stages],
            "n_gpu_layers": plan.n_gpu_layers, "tensor_split": list(plan.tensor_split),
            "seconds_per_token": plan.seconds_per_token, "bottleneck": plan.bottleneck, "slots": plan.slots}


def plans(seed: int) -> dict:
    shape, head, laptops, options, manual = random_lab(seed)
    return {mode: summary(plan_mode(mode, shape, head, laptops, options, manual if mode == "manual" else None))
            for mode in MODES}


def test_it_plans_cpu_only_labs_exactly_as_before():
    recorded = json.loads(RECORDED.read_text())["labs"]
    assert len(recorded) == LABS
    found = sum(1 for lab in recorded for plan in lab.values() if plan)
    assert found > LABS, "the labs are not all hopeless: most modes find a plan"
    for seed, before in enumerate(recorded):
        assert plans(seed) == {mode: without_empty_stages(plan) for mode, plan in before.items()}, \
            f"lab {seed} is planned differently now"


def without_empty_stages(plan: dict | None) -> dict | None:
    if plan is None:
        return None
    stages = [stage for index, stage in enumerate(plan["stages"]) if stage[2] or not index]
    return {**plan, "stages": stages, "tensor_split": [count for count in plan["tensor_split"] if count]}


if __name__ == "__main__":
    RECORDED.write_text(json.dumps({"labs": [plans(seed) for seed in range(LABS)]}, separators=(",", ":")))
    sys.exit(0)
