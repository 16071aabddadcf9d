"""A laptop's devices, as its latest probe lists them, become the planner's machines: a GPU with its free memory
less a reserve, the CPU with the laptop's usable RAM, one device of those sharing the RAM, none an admin keeps
out, each less what running deployments hold on it; a plan names each device it uses, on the page too."""

import pytest

from models_app.models import Deployment, DeploymentStage, DeploymentStatus, GgufModel
from models_app.planning import planner
from models_app.planning.records import (
    DEFAULT_SPEED_GB_S,
    GPU_BACKEND_RAM,
    PlanningError,
    as_record,
    make_plan,
    read_machines,
)
from nodes.models import Node, NodeStatus, Probe
from nodes.runtime import bundle as runtime
from tests.rows import HOST_KEY, client_for

MiB, GiB = 2**20, 2**30
HEAD = planner.Machine("head", 8 * GiB, 10.0)
RTX = {"name": "Vulkan0", "type": "gpu", "total": 1 * GiB, "free": 1 * GiB, "description": "NVIDIA GeForce RTX 3050"}
LLVMPIPE = {"name": "Vulkan0", "type": "gpu", "total": 3 * GiB, "free": 3 * GiB,
            "description": "llvmpipe (LLVM 15.0.6, 256 bits)"}
CPU = {"name": "CPU", "type": "cpu", "total": 3 * GiB, "free": 3 * GiB, "description": "Intel Core i5"}


def laptop(name: str, devices: list[dict] | None, **fields) -> Node:
    """3 GiB free, 1 GiB kept back: 2 GiB of RAM usable; the CPU measured at 8 GB/s."""
    node = Node.objects.create(name=name, host=f"192.0.2.{Node.objects.count() + 1}", username="lab",
                               host_key=HOST_KEY, status=NodeStatus.READY, **{"speed_gb_s": 8.0, **fields})
    facts = {"ram_available": 3 * GiB, **({"devices": devices} if devices is not None else {})}
    Probe.objects.create(node=node, facts=facts)
    return node


@pytest.fixture
def model(db) -> GgufModel:
    return GgufModel.objects.create(
        name="test-80", path="/nonexistent/test-80.gguf", size=80 * 12 * MiB, status="ready", architecture="llama",
        n_layer=80, n_embd=1024, n_head=16, n_head_kv=4, n_ff=4096, context_length=8192, vocab_size=32000,
        file_type="Q4_0", layer_bytes=[12 * MiB] * 80,
        other_tensors={"token_embd.weight": 20 * MiB, "output.weight": 20 * MiB})


def devices(machines) -> list[tuple]:
    return [(m.device, m.usable_bytes, m.bandwidth_gb_s, m.measured) for m in machines]


def test_each_laptop_brings_the_devices_it_may_plan_on(db):
    nodes = [laptop("gpu1", [RTX, CPU], device_speeds={"Vulkan0": 100.0}),
             laptop("gpu2", [RTX, CPU]),
             laptop("soft1", [LLVMPIPE, CPU], device_speeds={"Vulkan0": 3.0}),
             laptop("soft2", [LLVMPIPE, CPU], device_speeds={"Vulkan0": 12.0}),
             laptop("off1", [RTX, CPU], devices_off=["Vulkan0"]),
             laptop("old1", None)]
    gpu, ram = 1 * GiB - 256 * MiB, 2 * GiB
    beside = ram - GPU_BACKEND_RAM  # a server using a GPU holds its backend and driver in the laptop's RAM
    assert [devices(machines) for machines in read_machines(nodes)] == [
        [("Vulkan0", gpu, 100.0, True), ("CPU", beside, 8.0, True)],
        [("Vulkan0", gpu, DEFAULT_SPEED_GB_S, False), ("CPU", beside, 8.0, True)],
        [("CPU", ram, 8.0, True)],  # the software renderer is slower than the CPU it runs on
        [("Vulkan0", beside, 12.0, True)],  # measured faster: it, not the CPU, uses the laptop's RAM
        [("CPU", ram, 8.0, True)],  # the GPU is kept out of plans
        [("CPU", ram, 8.0, True)],  # probed before devices were listed
    ]


def test_running_deployments_hold_memory_on_the_devices_they_use(model):
    gpu1, old1 = laptop("gpu1", [RTX, CPU]), laptop("old1", None)
    running = Deployment.objects.create(model=model, ctx=512, plan={}, status=DeploymentStatus.READY)
    DeploymentStage.objects.create(deployment=running, position=0, node=gpu1, first_layer=0, layer_count=9,
                                   memory={"weights": 300 * MiB}, devices=[
                                       {"device": "Vulkan0", "first": 0, "count": 6, "memory": {"weights": 200 * MiB}},
                                       {"device": "CPU", "first": 6, "count": 3, "memory": {"weights": 100 * MiB}}])
    DeploymentStage.objects.create(deployment=running, position=1, node=old1, first_layer=9, layer_count=1,
                                   memory={"weights": 50 * MiB, "compute": 10 * MiB})
    with_gpu, cpu_only = read_machines([gpu1, old1])
    beside = 2 * GiB - GPU_BACKEND_RAM  # the GPU's backend and driver, in the laptop's RAM
    assert [m.usable_bytes for m in with_gpu] == [1 * GiB - 256 * MiB - 200 * MiB, beside - 100 * MiB]
    assert [m.usable_bytes for m in cpu_only] == [2 * GiB - 60 * MiB], "a stage planned before devices: its CPU"
    assert [m.usable_bytes for m in read_machines([gpu1, old1], replacing=running)[0]] == [768 * MiB, beside]


def test_a_plan_record_names_each_device_and_what_was_left_out(model):
    gpu1 = laptop("gpu1", [RTX, CPU], device_speeds={"Vulkan0": 100.0})
    small = laptop("gpu2", [{**RTX, "free": 300 * MiB}, CPU])
    record = as_record(make_plan(model, [gpu1, small], 2048, "fastest", head=HEAD))
    used = [(s["machine"], s["device"], s["label"]) for s in record["stages"][1:]]
    assert ("gpu1", "Vulkan0", "gpu1's Vulkan0") in used, "faster than any CPU, and roomy: it holds layers"
    assert ("gpu2", "Vulkan0", "gpu2's Vulkan0") not in used
    assert len(record["tensor_split"]) == len(used) and record["stages"][0]["device"] == "CPU"
    assert record["notes"][0].startswith("gpu2's Vulkan0 (NVIDIA GeForce RTX 3050, 44 MiB usable) cannot hold "
                                         "even one layer (needs ") and record["notes"][0].endswith("; it is left out.")
    assert record["bottleneck"] in ("gpu1", "gpu2") and record["bottleneck_label"] in [label for *_, label in used]


def test_a_gpu_whose_speed_was_not_measured_is_planned_at_the_default_and_said_so(model):
    slow_cpu = laptop("gpu2", [RTX, CPU], speed_gb_s=2.0)
    record = as_record(make_plan(model, [slow_cpu], 2048, "fastest", head=HEAD))
    assert record["stages"][1]["label"] == "gpu2's Vulkan0" and record["stages"][1]["measured"] is False
    assert record["notes"] == [f"Not measured yet, so planned at {DEFAULT_SPEED_GB_S:g} GB/s: gpu2's Vulkan0. "
                               "Measure them on their laptops' pages."]


def test_the_plan_page_shows_a_row_per_device(model, alice):
    gpu1 = laptop("gpu1", [RTX, CPU], device_speeds={"Vulkan0": 100.0})
    laptop("cpu1", None)
    page = client_for(alice).get("/models/plan/", {"model": model.pk, "nodes": [gpu1.pk], "ctx": 2048,
                                                   "mode": "fastest", "slots": 1})
    rows = [row["machine"] for row in page.context["split"]]
    assert rows[:3] == ["head", "gpu1's Vulkan0", "gpu1's CPU"], rows
    assert "gpu1&#x27;s Vulkan0" in page.content.decode()


def test_a_split_over_more_devices_than_llama_cpp_holds_is_refused_in_words(model, monkeypatch):
    monkeypatch.setattr(runtime, "MAX_LAPTOPS", 3)
    laptops = [laptop(f"gpu{n}", [RTX, CPU], device_speeds={"Vulkan0": 100.0}) for n in (1, 2)]
    with pytest.raises(PlanningError, match="The even split would use 4 devices .* at most 3 besides the head"):
        make_plan(model, laptops, 2048, "even", head=HEAD)
    assert len(make_plan(model, laptops, 2048, "fastest", head=HEAD).tensor_split) <= 3
