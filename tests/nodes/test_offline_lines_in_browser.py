"""The dashboard's charts mark an offline laptop's lines as stale — faint and named "(offline)" — instead of
leaving them looking live at their last sample, and bring them back when samples come again."""

import threading
import time

from clusterpanel.broadcast import broadcast
from nodes.models import Node
from tests.browser import browser_page, log_in
from tests.conftest import PASSWORD

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJRvvesEHT9Lj/odiUekLSyxfHkxh+kIRGnuGyJVpB1/"
TRACES = """() => (document.querySelector("#cluster-charts [data-chart=cpu]").data || [])
  .map((t) => ({ name: t.name, opacity: t.opacity ?? 1, points: t.x.length }))"""


def tell(event: str, payload: dict) -> None:
    """Off Playwright's thread, which runs its own event loop."""
    worker = threading.Thread(target=broadcast, args=("dashboard", event, payload))
    worker.start()
    worker.join()


def sample(node: Node) -> dict:
    return {"node": node.pk, "name": node.name, "t": time.time(), "cpu": 40.0, "cores": [40.0], "ram_used": 2**30,
            "ram_total": 2**32, "swap_used": 0, "rx": 1000.0, "tx": 1000.0}


def test_an_offline_laptops_lines_go_faint_and_say_so_until_it_is_back(alice, web_server):
    lab, other = (Node.objects.create(name=name, host="192.0.2.1", username="u", host_key=KEY)
                  for name in ("lab-1", "lab-2"))
    with browser_page() as page:
        log_in(page, web_server, "alice", PASSWORD)
        page.wait_for_function("() => window.Plotly && document.querySelector('#cluster-charts .main-svg')")
        page.wait_for_timeout(1000)  # the socket joins the dashboard's group
        for _ in range(3):
            tell("dashboard.metrics", sample(lab))
            tell("dashboard.metrics", sample(other))
            page.wait_for_timeout(300)
        page.wait_for_function("() => document.querySelector('#cluster-charts [data-chart=cpu]').data?.length === 2")
        tell("dashboard.state", {"node": lab.pk, "name": lab.name, "state": "offline", "t": time.time()})
        page.wait_for_function("() => document.querySelector('#cluster-charts [data-chart=cpu]').data"
                               ".some((t) => t.name === 'lab-1 (offline)')")
        traces = {t["name"]: t["opacity"] for t in page.evaluate(TRACES)}
        assert traces == {"lab-1 (offline)": 0.35, "lab-2": 1}
        assert "Offline" in page.inner_text(f"[data-node-state='{lab.pk}']")
        tell("dashboard.metrics", sample(lab))
        page.wait_for_function("() => document.querySelector('#cluster-charts [data-chart=cpu]').data"
                               ".some((t) => t.name === 'lab-1')")
        assert {t["name"]: t["opacity"] for t in page.evaluate(TRACES)} == {"lab-1": 1, "lab-2": 1}
