"""A deployment over 39 laptops reads on a laptop screen and a phone: its laptops in pipeline order, each with its
run of layers, the bottleneck laptop called out in words and in its row, nothing wider than the screen, and
nothing an accessibility check finds."""

import re
from pathlib import Path

import pytest

from clusterpanel.accounts.models import Role, User
from models_app.models import Deployment, DeploymentStage, DeploymentStatus, GgufModel, ModelStatus
from models_app.planning import planner
from models_app.planning.records import as_record
from nodes.models import Node, NodeStatus
from tests.a11y import violations
from tests.browser import browser_page, log_in
from tests.conftest import PASSWORD

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJRvvesEHT9Lj/odiUekLSyxfHkxh+kIRGnuGyJVpB1/"
MiB, GiB = 2**20, 2**30
LAPTOPS, N_LAYER = 39, 80
SLOW = "hid5-17"
SIZES = {"desktop": (1440, 900), "phone": (390, 844)}
SHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
ROWS = """() => [...document.querySelectorAll("#pipeline tbody tr")].map((row) => ({
  laptop: row.cells[1].querySelector("a").textContent, layers: row.cells[2].textContent.trim(),
  bottleneck: row.classList.contains("bottleneck-row") }))"""


def big_deployment() -> tuple[Deployment, list[str]]:
    """The issue's lab: 39 laptops, an 80-layer model, one laptop slower than the rest; the pipeline runs from
    hid5-39 down to hid5-1 (a plan's own order, not the names' order)."""
    model = GgufModel.objects.create(
        name="llama-80", path="/nonexistent/llama-80.gguf", size=1, status=ModelStatus.READY, architecture="llama",
        n_layer=N_LAYER, n_embd=1024, n_head=8, n_head_kv=8, context_length=4096, vocab_size=32000,
        file_type="Q4_K_M", layer_bytes=[40 * MiB] * N_LAYER)
    order = [f"hid5-{n}" for n in range(LAPTOPS, 0, -1)]
    for number in (7, 30, 1, 22, *[n for n in range(1, LAPTOPS + 1) if n not in (7, 30, 1, 22)]):
        Node.objects.create(name=f"hid5-{number}", host=f"192.0.2.{number}", username="u", host_key=KEY,
                            status=NodeStatus.READY)
    shape = planner.ModelShape((40 * MiB,) * N_LAYER, 60 * MiB, 60 * MiB, 1024, 8, 8, 32000)
    laptops = [planner.Machine(name, 2 * GiB, 2.0 if name == SLOW else 10.0, 0.002) for name in order]
    plan = planner.plan_mode("even", shape, planner.Machine("head", 4 * GiB, 10.0), laptops,
                             planner.Options(ctx=1024, head_may_hold_layers=False))
    assert plan is not None and plan.bottleneck == SLOW
    deployment = Deployment.objects.create(model=model, ctx=1024, mode="even", plan=as_record(plan),
                                           status=DeploymentStatus.READY)
    nodes = {node.name: node for node in Node.objects.all()}
    for position, stage in enumerate(plan.stages[1:]):
        DeploymentStage.objects.create(deployment=deployment, position=position, node=nodes[stage.machine.name],
                                       first_layer=stage.first, layer_count=stage.count, memory=stage.memory.__dict__)
    return deployment, order


def covering(layers: list[str]) -> list[int]:
    """The layer numbers the rows' ranges name, in order ("layers 2–3", "layers 78–79 and the output layer")."""
    found = []
    for text in layers:
        first, last = map(int, re.match(r"[Ll]ayers? (\d+)(?:–(\d+))?", text).groups(default="-1"))
        found += range(first, (last if last >= 0 else first) + 1)
        if text.endswith("the output layer"):
            found.append(N_LAYER)
    return found


@pytest.mark.parametrize("size", SIZES)
def test_it_lists_the_pipeline_with_layer_ranges_and_calls_out_the_bottleneck(db, web_server, size):
    User.objects.create_user("carol", password=PASSWORD, role=Role.ADMIN)
    deployment, order = big_deployment()
    width, height = SIZES[size]
    with browser_page() as page:
        page.set_viewport_size({"width": width, "height": height})
        log_in(page, web_server, "carol", PASSWORD)
        page.goto(f"{web_server}/models/deployments/{deployment.pk}/")
        rows = page.evaluate(ROWS)
        assert [row["laptop"] for row in rows] == order
        assert covering([row["layers"] for row in rows]) == list(range(N_LAYER + 1))
        assert [row["laptop"] for row in rows if row["bottleneck"]] == [SLOW]
        said = page.inner_text("#bottleneck")
        assert said.startswith(f"Bottleneck: {SLOW}, the slowest stage") and "sets the speed" in said
        assert page.locator(".split-raw").inner_text().startswith("As llama.cpp takes it: n_gpu_layers=81")
        page.wait_for_function("(width) => document.documentElement.scrollWidth <= width", arg=width)
        page.wait_for_function("() => document.querySelectorAll('#plan-charts .main-svg').length > 0")
        assert violations(page) == []
        page.screenshot(path=SHOTS / f"deployment-39{'' if size == 'desktop' else '-phone'}.png", full_page=True)
