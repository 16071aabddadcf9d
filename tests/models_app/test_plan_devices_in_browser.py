"""In a real Chromium, a plan over laptops with GPUs draws each device it uses as a row of its own, named beside
its laptop ("gpu1's Vulkan0", "gpu1's CPU"), in the split table and on both charts; a laptop of one device keeps
its plain name."""

import pytest

from clusterpanel.accounts.models import Role, User
from models_app.models import GgufModel
from nodes.models import Node, NodeStatus, Probe
from tests.browser import browser_page, log_in
from tests.conftest import PASSWORD
from tests.rows import HOST_KEY

MiB, GiB = 2**20, 2**30
RTX = {"name": "Vulkan0", "type": "gpu", "total": GiB, "free": GiB, "description": "NVIDIA GeForce RTX 3050"}
CPU = {"name": "CPU", "type": "cpu", "total": 3 * GiB, "free": 3 * GiB, "description": "Intel Core i5"}
TICKS = """([id, axis]) => [...document.querySelectorAll(`#${id} .${axis}axislayer-above .${axis}tick text`)]
  .map((t) => t.textContent)"""
DRAWN = "() => document.querySelectorAll('#plan-layers-2 .main-svg, #plan-memory-2 .main-svg').length >= 2"


@pytest.fixture
def model(db) -> GgufModel:
    User.objects.create_user("carol", password=PASSWORD, role=Role.ADMIN)
    for name, devices in (("gpu1", [RTX, CPU]), ("lab-2", None)):
        node = Node.objects.create(name=name, host="192.0.2.1", username="lab", host_key=HOST_KEY,
                                   status=NodeStatus.READY, speed_gb_s=8.0, device_speeds={"Vulkan0": 100.0})
        Probe.objects.create(node=node, facts={"ram_available": 3 * GiB, **({"devices": devices} if devices else {})})
    return GgufModel.objects.create(
        name="test-80", path="/nonexistent/test-80.gguf", size=80 * 12 * MiB, status="ready", architecture="llama",
        n_layer=80, n_embd=1024, n_head=16, n_head_kv=4, n_ff=4096, context_length=8192, vocab_size=32000,
        file_type="Q4_0", layer_bytes=[12 * MiB] * 80,
        other_tensors={"token_embd.weight": 20 * MiB, "output.weight": 20 * MiB})


def test_each_device_is_a_row_of_its_own(model, web_server):
    with browser_page() as page:
        log_in(page, web_server, "carol", PASSWORD)
        page.goto(f"{web_server}/models/plan/?model={model.pk}&ctx=2048&slots=1&mode=even")  # the third chart
        page.wait_for_function(DRAWN)
        devices = ["gpu1's Vulkan0", "gpu1's CPU", "lab-2"]
        rows = [row.removesuffix(" (bottleneck)") for row in page.locator("#split td.machine").all_inner_texts()]
        assert rows == ["head", *devices]
        assert page.evaluate(TICKS, ["plan-layers-2", "y"]) == devices, "one bar per device, not one per laptop"
        bars = page.evaluate(TICKS, ["plan-memory-2", "x"])[1:]  # the head first; upright bars for a few machines
        assert [next((name for name in devices if bar.startswith(name)), bar) for bar in bars] == devices, bars
