"""The plan page reads at 39 laptops in a real Chromium, on a laptop screen and on a phone: the split as a
layer range per laptop in pipeline order with names counted (hid5-2 before hid5-10), the bottleneck named in
words, every laptop's name whole on the charts, legends of a few entries, and nothing wider than a phone."""

from pathlib import Path

import pytest

from clusterpanel.accounts.models import Role, User
from models_app.models import GgufModel
from nodes.models import Node, NodeStatus, Probe
from tests.browser import browser_page, log_in
from tests.conftest import PASSWORD
from tests.rows import HOST_KEY

SHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
SIZES = {"": (1440, 900), "-phone": (390, 844)}
MiB = 2**20
NAMES = [f"hid5-{n}" for n in range(1, 40)]
SLOW = "hid5-17"
DRAWN = "() => document.querySelectorAll('#plan-layers-2 .main-svg, #plan-memory-2 .main-svg').length >= 2"
TICKS = """(id) => [...document.querySelectorAll(`#${id} .yaxislayer-above .ytick text`)].map((t) => {
  const r = t.getBoundingClientRect(), box = document.getElementById(id).getBoundingClientRect();
  return { text: t.textContent, inside: r.left >= box.left - 1 && r.right <= box.right + 1 }; })"""
LEGENDS = """() => [...document.querySelectorAll("#plan-charts .legend")]
  .map((legend) => legend.querySelectorAll(".traces").length)"""


@pytest.fixture
def lab(db):
    """39 probed laptops of 2 GiB, created in a shuffled order, one of them slow; an 80-layer model."""
    User.objects.create_user("carol", password=PASSWORD, role=Role.ADMIN)
    for name in sorted(NAMES):  # text order, as a careless listing would give them
        node = Node.objects.create(name=name, host="192.0.2.1", username="lab", host_key=HOST_KEY,
                                   status=NodeStatus.READY, speed_gb_s=1.0 if name == SLOW else 8.0)
        Probe.objects.create(node=node, facts={"ram_available": 3 << 30, "ram_limit": 2 << 30})
    return GgufModel.objects.create(
        name="test-80", path="/nonexistent/test-80.gguf", size=80 * 12 * MiB, status="ready", architecture="llama",
        n_layer=80, n_embd=1024, n_head=16, n_head_kv=4, n_ff=4096, context_length=8192, vocab_size=32000,
        file_type="Q4_0", layer_bytes=[12 * MiB] * 80,
        other_tensors={"token_embd.weight": 20 * MiB, "output.weight": 20 * MiB})


def covered_layers(ranges: list[str]) -> list[int]:
    """Layer numbers named by "layers 4–5", "layer 6", "layers 78–79 and the output layer" (80)."""
    covered = []
    for said in ranges:
        words = said.replace("and the output layer", "").replace("layers", "").replace("layer", "").strip()
        first, _, last = words.partition("–")
        covered += range(int(first), int(last or first) + 1) if words else []
        covered += [80] if "output layer" in said else []
    return covered


def test_the_plan_page_reads_at_39_laptops(lab, web_server):
    with browser_page() as page:
        log_in(page, web_server, "carol", PASSWORD)
        for suffix, (width, height) in SIZES.items():
            page.set_viewport_size({"width": width, "height": height})
            page.goto(f"{web_server}/models/plan/?model={lab.pk}&ctx=1024&slots=1&mode=even")
            page.wait_for_function(DRAWN)
            rows = page.locator("#split tbody tr")
            names = [row.locator("td.machine").inner_text().split()[0] for row in rows.all()]
            assert names == ["head", *NAMES], "the head, then every laptop in pipeline order, numbers counted"
            ranges = [" ".join(row.locator("td.layers").inner_text().split()) for row in rows.all()[1:]]
            assert covered_layers(ranges) == list(range(81)), "each laptop's run of layers, every layer once"
            assert page.locator("#split tr.bottleneck td.machine").inner_text().split() == [SLOW, "(bottleneck)"]
            said = page.locator("#bottleneck").inner_text()
            assert said.startswith(f"The bottleneck is {SLOW}, holding layers ") and " ms a token takes" in said
            for chart in ("plan-layers-2", "plan-memory-2"):  # the modes' charts in turn: even's are the third
                ticks = page.evaluate(TICKS, chart)
                expected = ["head", *NAMES] if chart == "plan-memory-2" else NAMES
                assert [t["text"].split(" of ")[0] for t in ticks] == expected, chart
                assert all(t["inside"] for t in ticks), f"{chart}: a name cut at the chart's edge"
            assert max(page.evaluate(LEGENDS)) <= 5, "legends of kinds, not of 39 laptops"
            assert page.locator("#plan-layers-2 .legend").text_content().strip() == f"the bottleneck, {SLOW}"
            assert page.locator(".llama-args").inner_text().startswith("As llama.cpp takes it")
            wide = page.evaluate("() => document.documentElement.scrollWidth")
            assert wide <= width, f"{wide} px of page on a {width} px screen"
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SHOTS / f"plan-39{suffix}.png"), full_page=True)
