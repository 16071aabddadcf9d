"""The chart pages read at a glance in a real Chromium, at a desktop and a phone size: no legend over an axis
title, no toolbar over a chart's title, every machine's memory written above its bar however thin, lines drawn
on top of each other said to be so, and the output layer named."""

import time

import pytest

from clusterpanel.accounts.models import Role, User
from models_app.library.adding import ensure_bundled
from nodes.metrics import store as metrics
from nodes.models import Node, NodeStatus, Probe
from tests.browser import browser_page, log_in
from tests.conftest import PASSWORD
from tests.nodes.test_doctor import KEY, TROUBLED

SIZES = {"desktop": (1440, 900), "phone": (390, 844)}
MiB = 2**20
COVERED = """() => [...document.querySelectorAll(".js-plotly-plot")].flatMap((chart) => {
  const box = (selector) => { const e = chart.querySelector(selector); if (!e) return null;
    const r = e.getBoundingClientRect(); return r.width && r.height ? r : null; };
  const hit = (a, b) => a && b && a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
  const legend = box(".legend"), xtitle = box(".g-xtitle"), title = box(".g-gtitle"), toolbar = box(".modebar");
  const name = chart.id || chart.dataset.chart;
  return [hit(legend, xtitle) && `${name}: the legend covers the x axis title`,
          hit(toolbar, title) && `${name}: the toolbar covers the title`].filter(Boolean); })"""
DRAWN = "() => document.querySelectorAll('.js-plotly-plot .main-svg').length > 0"


@pytest.fixture
def lab(db):
    """Three alike laptops sending the same samples (as simulated ones on one machine do), and the model."""
    User.objects.create_user("carol", password=PASSWORD, role=Role.ADMIN)
    nodes = []
    for number in (1, 2, 3):
        node = Node.objects.create(name=f"alike-{number}", host=f"10.0.0.{number}", username="u", host_key=KEY,
                                   status=NodeStatus.READY)
        Probe.objects.create(node=node, facts={**TROUBLED, "ram_available": 6 << 30})
        node.usable_memory = 100 * MiB
        node.save()
        now = time.time()
        for second in range(30, 0, -1):
            metrics.append(node.pk, {"t": now - second, "cpu": 12.0, "cores": [12.0, 12.0], "ram_used": 2 << 30,
                                     "ram_total": 8 << 30, "ram_available": 6 << 30, "swap_used": 0,
                                     "rx": 1000, "tx": 1000})
        nodes.append(node)
    return ensure_bundled(), nodes


def pages(model, nodes) -> dict[str, str]:
    chosen = "&".join(f"nodes={node.pk}" for node in nodes)
    return {"dashboard": "/", "laptop": f"/nodes/{nodes[0].name}/", "model": f"/models/{model.name}/",
            "plan": f"/models/plan/?model={model.pk}&{chosen}&ctx=512&mode=even"}


@pytest.mark.parametrize("size", SIZES)
def test_it_keeps_legends_off_axis_titles_and_toolbars_off_titles(lab, web_server, size):
    model, nodes = lab
    with browser_page() as page:
        page.set_viewport_size(dict(zip(("width", "height"), SIZES[size], strict=True)))
        log_in(page, web_server, "carol", PASSWORD)
        for name, path in pages(model, nodes).items():
            page.goto(web_server + path)
            page.wait_for_function(DRAWN)
            page.wait_for_timeout(300)  # the live charts draw their history after a fetch
            page.hover(".js-plotly-plot")  # where a toolbar shows, it shows now
            assert page.evaluate(COVERED) == [], name


def test_it_writes_each_machines_memory_above_its_bar_and_names_the_output_layer(lab, web_server):
    model, nodes = lab
    with browser_page() as page:
        log_in(page, web_server, "carol", PASSWORD)
        page.goto(web_server + pages(model, nodes)["plan"])
        page.wait_for_function(DRAWN)
        labels = page.locator("#plan-memory .textpoint text").all_text_contents()
        assert len(labels) == len(nodes) + 1 and all(label.endswith("MiB") for label in labels), labels
        assert page.locator("#plan-memory .g-ytitle").text_content() == "memory (MiB)", "stacks under 1 GiB"
        assert f"({model.n_layer} is the output layer)" in page.locator("#plan-layers .g-xtitle").text_content()
        counted = page.locator(".layer-count").inner_text()
        assert f"layer {model.n_layer}, so n_gpu_layers={model.n_layer + 1}" in counted


def test_it_says_when_lines_lie_on_top_of_each_other(lab, web_server):
    """A laptop whose cores all run at its total draws three lines as one (the dashboard draws heat-strips)."""
    _, nodes = lab
    with browser_page() as page:
        log_in(page, web_server, "carol", PASSWORD)
        page.goto(f"{web_server}/nodes/{nodes[0].name}/")
        said = page.locator("[data-chart=cpu] .annotation-text")
        said.wait_for()
        assert said.text_content() == "total = core 0 = core 1: one line on top of another"


def test_it_keeps_the_bars_in_sight_of_a_laptop_with_room_to_spare(lab, web_server):
    """A usable mark at 20 GiB would flatten stacks of tens of MiB: the room is written under the name instead."""
    model, nodes = lab
    Node.objects.filter(pk=nodes[2].pk).update(usable_memory=20 << 30)
    with browser_page() as page:
        log_in(page, web_server, "carol", PASSWORD)
        page.goto(web_server + pages(model, nodes)["plan"])
        page.wait_for_function(DRAWN)
        even = page.locator("#plan-memory-2")
        assert even.locator(".g-ytitle").text_content() == "memory (MiB)"
        assert "alike-3of 20.0 GiB" in even.locator(".xaxislayer-above").text_content()
        assert "usable" not in even.locator(".legend").text_content()
