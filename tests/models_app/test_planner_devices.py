"""Laptops with GPUs: the planner splits a model over devices, a laptop's side by side in its server's order, a
faster GPU filled first, a GPU too small for a layer left out and said, a hand split given per laptop."""

from itertools import permutations

from hypothesis import given, settings
from hypothesis import strategies as st

from clusterpanel.kit.units import size
from models_app.planning.fit import explain_no_fit
from models_app.planning.planner import (
    GiB,
    Machine,
    MiB,
    ModelShape,
    build,
    laptop_stages,
    one_unit_bytes,
    plan_fastest,
    plan_mode,
    stage_memory,
)
from models_app.planning.split_search import SECOND_DEVICE_HOP, laptop_groups
from tests.models_app.test_planner import SHAPE, SMALL, check_plan

HOP = 0.0016
HEAD = Machine("head", 80 * MiB, 20)  # room for the embedding, not for a layer


def gpu_laptop(name: str, gpu_bytes: int, gpu_speed: float = 100.0, cpu_bytes: int = 2 * GiB,
               cpu_speed: float = 10.0, description: str = "NVIDIA GeForce RTX 3050") -> list[Machine]:
    return [Machine(name, gpu_bytes, gpu_speed, HOP, "Vulkan0", description),
            Machine(name, cpu_bytes, cpu_speed, HOP)]


def used(plan) -> list[tuple[str, str, int]]:
    return [(stage.machine.name, stage.machine.device, stage.count) for stage in plan.stages[1:]]


def test_it_fills_a_faster_gpu_first_and_puts_the_rest_on_its_cpu():
    plan = plan_fastest(SHAPE, HEAD, gpu_laptop("gpu1", 500 * MiB), SMALL)
    assert [(name, device) for name, device, _ in used(plan)] == [("gpu1", "Vulkan0"), ("gpu1", "CPU")]
    gpu, cpu = plan.stages[1:]
    assert gpu.count == 4 and cpu.count == 5, "as many layers as the GPU holds, the rest and the output on the CPU"
    assert plan.tensor_split == (4, 5) and plan.n_gpu_layers == 9
    assert (gpu.hop_s, cpu.hop_s) == (HOP, HOP * SECOND_DEVICE_HOP), "the second device costs half a hop"
    check_plan(plan, SHAPE)


def test_a_gpu_that_holds_everything_leaves_the_cpu_out_of_the_plan():
    plan = plan_fastest(SHAPE, HEAD, gpu_laptop("gpu1", 4 * GiB), SMALL)
    assert used(plan) == [("gpu1", "Vulkan0", 9)] and plan.tensor_split == (9,)


def test_a_slower_gpu_is_left_idle_when_the_cpu_holds_the_model():
    plan = plan_fastest(SHAPE, HEAD, gpu_laptop("igpu", 4 * GiB, gpu_speed=3.0), SMALL)
    assert used(plan) == [("igpu", "CPU", 9)]


def test_a_gpu_too_small_for_one_layer_is_left_out_and_the_plan_says_how_much_it_lacks():
    laptops = gpu_laptop("gpu1", 30 * MiB, description="llvmpipe (LLVM 15.0.6, 256 bits)")
    for mode in ("fastest", "memory", "even", "manual"):
        plan = plan_mode(mode, SHAPE, HEAD, laptops, SMALL, manual=[0, 9])
        assert used(plan) == [("gpu1", "CPU", 9)], mode
        (left, needs), = plan.left_out
        assert left == laptops[0] and needs > left.usable_bytes, "the device, and the bytes one layer needs"


def test_a_laptops_devices_stay_side_by_side_and_in_their_servers_order():
    laptops = [*gpu_laptop("gpu1", 400 * MiB), Machine("cpu2", 600 * MiB, 12, HOP)]
    for mode in ("fastest", "memory", "even"):
        plan = plan_mode(mode, SHAPE, HEAD, laptops, SMALL)
        runs = [[(stage.machine.name, stage.machine.device) for stage in run] for run in laptop_stages(plan)]
        assert sorted(name for run in runs for name, _ in run[:1]) == ["cpu2", "gpu1"], mode
        assert ("gpu1", "Vulkan0") not in [pair for run in runs for pair in run[1:]], "the GPU before its CPU"
        check_plan(plan, SHAPE)


def test_memory_and_even_modes_weigh_each_device():
    laptops = [*gpu_laptop("gpu1", 1 * GiB, cpu_bytes=3 * GiB), Machine("cpu2", 4 * GiB, 10, HOP)]
    assert plan_mode("even", SHAPE, HEAD, laptops, SMALL).tensor_split == (3, 3, 3)
    assert plan_mode("memory", SHAPE, HEAD, laptops, SMALL).tensor_split == (1, 3, 5)


def test_a_manual_split_gives_each_laptop_its_count_and_its_devices_share_it_fastest_first():
    laptops = [*gpu_laptop("gpu1", 300 * MiB), Machine("cpu2", 2 * GiB, 10, HOP)]
    plan = plan_mode("manual", SHAPE, HEAD, laptops, SMALL, manual=[0, 6, 3])
    assert used(plan) == [("gpu1", "Vulkan0", 2), ("gpu1", "CPU", 4), ("cpu2", "CPU", 3)]
    assert plan_mode("manual", SHAPE, HEAD, laptops, SMALL, manual=[0, 2, 2, 5]) is None, "a count per laptop"
    assert plan_mode("manual", SHAPE, HEAD, laptops, SMALL, manual=[0, 0, 9]) is None, "a chosen laptop holds one"


def test_when_nothing_fits_it_says_which_device_lacks_how_much():
    laptops = gpu_laptop("gpu1", 30 * MiB, cpu_bytes=300 * MiB, description="llvmpipe (LLVM 15.0.6, 256 bits)")
    assert plan_mode("fastest", SHAPE, HEAD, laptops, SMALL) is None
    needs = size(one_unit_bytes(SHAPE, SMALL))
    assert (f"gpu1's Vulkan0 (llvmpipe, 30 MiB usable) cannot hold even one layer (needs {needs}); it is left out."
            in explain_no_fit(SHAPE, HEAD, laptops, SMALL).explain())
    whole = stage_memory(SHAPE, 0, 9, SMALL, is_head=False).total
    assert (f"In the even split, gpu1 would hold layers 0–7 and the output layer, needing {size(whole)} of its "
            f"300 MiB usable ({size(whole - 300 * MiB)} short)." in explain_no_fit(SHAPE, HEAD, laptops, SMALL,
                                                                               "even").explain())
    tiny = [Machine("gpu2", 20 * MiB, 100, HOP, "CUDA0", "NVIDIA GeForce GT 710"), Machine("gpu2", 20 * MiB, 10, HOP)]
    said = explain_no_fit(SHAPE, HEAD, tiny, SMALL).explain()
    assert f"gpu2's CUDA0 (NVIDIA GeForce GT 710, 20 MiB usable) cannot hold even one layer (needs {needs})." in said
    assert f"gpu2's CPU (20 MiB usable) cannot hold even one layer (needs {needs})." in said


def test_it_never_uses_more_devices_than_llama_cpp_holds():
    """Past the limit an ordering is passed over whole: fewer laptops then hold the model."""
    laptops = [*gpu_laptop("gpu1", 300 * MiB, cpu_bytes=1 * GiB), *gpu_laptop("gpu2", 300 * MiB, cpu_bytes=1 * GiB)]
    unlimited = plan_fastest(SHAPE, HEAD, laptops, SMALL)
    assert len(unlimited.tensor_split) == 3 and len(laptop_stages(unlimited)) == 2
    plan = plan_fastest(SHAPE, HEAD, laptops, SMALL.with_(max_laptops=2))
    assert len(plan.tensor_split) == 2 and len(laptop_stages(plan)) == 1
    assert plan_fastest(SHAPE, HEAD, laptops, SMALL.with_(max_laptops=1)) is None, "no device holds it alone"


def splits(total: int, devices: list[Machine], head_may_hold: bool):
    """Every way to give the head some units and each device any, each laptop holding one at least."""
    def parts(rest: int, count: int):
        if count == 1:
            yield [rest]
            return
        for first in range(rest + 1):
            yield from ([first, *more] for more in parts(rest - first, count - 1))

    groups = laptop_groups(devices)
    for head in range(total + 1 if head_may_hold else 1):
        for counts in (parts(total - head, len(devices)) if devices else [[]] if head == total else []):
            if all(sum(counts[i] for i in group) for group in groups):
                yield [head, *counts]


def brute_force(shape, head, laptops, options):
    groups, best = laptop_groups(laptops), None
    for count in range(len(groups) + 1):
        for order in permutations(range(len(groups)), count):
            devices = [laptops[i] for laptop in order for i in groups[laptop]]
            for counts in splits(shape.n_layer + 1, devices, options.head_may_hold_layers):
                plan = build("brute", shape, head, devices, counts, options)
                if plan and (best is None or plan.seconds_per_token < best.seconds_per_token):
                    best = plan
    return best


def devices_of(name: str, ram: float, speed: float, hop: float, gpus: list) -> list[Machine]:
    return [*(Machine(name, int(gib * GiB), fast, hop, f"Vulkan{k}") for k, (gib, fast) in enumerate(gpus)),
            Machine(name, int(ram * GiB), speed, hop)]


laptop = st.tuples(st.floats(0.05, 0.8), st.floats(2, 40), st.floats(0, 0.002),
                   st.lists(st.tuples(st.floats(0.0, 0.6), st.floats(2, 200)), max_size=2))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(20, 160), min_size=2, max_size=4), st.lists(laptop, min_size=1, max_size=3),
       st.booleans())
def test_it_equals_the_best_split_over_devices_found_by_brute_force(sizes, specs, head_may_hold):
    shape = ModelShape(tuple(s * MiB for s in sizes), 30 * MiB, 20 * MiB, 512, 8, 2, 8000)
    laptops = [machine for n, spec in enumerate(specs) for machine in devices_of(f"lab-{n}", *spec)]
    options = SMALL.with_(head_may_hold_layers=head_may_hold)
    head = Machine("head", 200 * MiB, 20)
    best, found = brute_force(shape, head, laptops, options), plan_fastest(shape, head, laptops, options)
    assert (best is None) == (found is None)
    if best:
        assert abs(found.seconds_per_token - best.seconds_per_token) < 1e-12
        check_plan(found, shape)
