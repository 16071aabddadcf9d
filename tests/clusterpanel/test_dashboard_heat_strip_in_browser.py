"""The dashboard shows every laptop as one row of a heat-strip per metric (CPU, memory, network), laptops in
natural order (lab-2 before lab-10), each row moving as its samples arrive through the dashboard's group (the
collector's path from the channel layer on), and the busiest laptop called out; an offline laptop's row says so
and stops, and comes back with its samples."""

import threading
import time

from clusterpanel.kit.broadcast import broadcast
from nodes.metrics import store as metrics
from nodes.models import Node, NodeStatus
from tests.a11y import violations
from tests.browser import browser_page, log_in
from tests.conftest import PASSWORD

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJRvvesEHT9Lj/odiUekLSyxfHkxh+kIRGnuGyJVpB1/"
LAPTOPS = 12
GiB = 2**30
# Per strip: its rows' laptop names, the label each row shows, each row's newest value (null: none), its title.
STRIP = """(metric) => { const strip = document.querySelector(`#heat-strip [data-strip=${metric}]`);
  const trace = strip && strip.data && strip.data[0]; if (!trace) return null;
  const newest = trace.z.map((row) => { for (let i = row.length - 1; i >= 0; i--) if (row[i] !== null) return row[i];
    return null; });
  return { names: trace.y, labels: strip.layout.yaxis.ticktext, newest, now: trace.z.map((row) => row[row.length - 1]),
           title: document.querySelector(`[data-caption=${metric}]`).textContent,
           outlined: strip.layout.shapes.map((s) => (s.y0 + s.y1) / 2) }; }"""


def tell(event: str, payload: dict) -> None:
    """Off Playwright's thread, which runs its own event loop."""
    worker = threading.Thread(target=broadcast, args=("dashboard", event, payload))
    worker.start()
    worker.join()


def sample(node: Node, cpu: float, t: float) -> dict:
    return {"node": node.pk, "name": node.name, "t": t, "cpu": cpu, "cores": [cpu], "ram_used": GiB,
            "ram_total": 4 * GiB, "ram_available": 3 * GiB, "swap_used": 0, "rx": 500_000, "tx": 250_000}


def laptops() -> list[Node]:
    """Made out of order, half of them with a minute of history; the others have sent nothing yet."""
    made = []
    for number in (10, 2, 12, 1, 11, 3, 9, 4, 8, 5, 7, 6)[:LAPTOPS]:
        node = Node.objects.create(name=f"lab-{number}", host=f"192.0.2.{number}", username="u", host_key=KEY,
                                   status=NodeStatus.READY)
        if number % 2:
            for second in range(60, 0, -1):
                metrics.append(node.pk, sample(node, 5.0, time.time() - second))
        made.append(node)
    return sorted(made, key=lambda node: int(node.name.split("-")[1]))


def send_round(nodes: list[Node], cpu_of) -> list[float]:
    now = time.time()
    sent = [cpu_of(i) for i in range(len(nodes))]
    for node, cpu in zip(nodes, sent, strict=True):
        tell("dashboard.metrics", sample(node, cpu, now))
    return sent


def wait_for_newest(page, metric: str, values: list) -> dict:
    page.wait_for_function(f"(values) => {{ const s = ({STRIP})('{metric}');"
                           " return s && JSON.stringify(s.now) === JSON.stringify(values); }", arg=values)
    return page.evaluate(STRIP, metric)


def test_every_laptop_has_a_row_in_natural_order_moving_live_with_the_busiest_called_out(alice, web_server):
    nodes = laptops()
    names = [f"lab-{n}" for n in range(1, LAPTOPS + 1)]
    with browser_page() as page:
        log_in(page, web_server, "alice", PASSWORD)
        page.wait_for_function(f"() => ({STRIP})('cpu') !== null")
        strip_of_names = page.locator(".node-strip a").evaluate_all(
            "(links) => links.map((a) => a.firstChild.textContent.trim())")
        assert strip_of_names == names
        for metric in ("cpu", "ram", "net"):
            assert page.evaluate(STRIP, metric)["names"] == names, metric
        shown = page.evaluate(STRIP, "cpu")
        assert [value is not None for value in shown["newest"]] == [n % 2 == 1 for n in range(1, LAPTOPS + 1)]
        page.wait_for_timeout(1000)  # the socket joins the dashboard's group

        strip = wait_for_newest(page, "cpu", send_round(nodes, lambda i: 10.0 + i))
        assert strip["title"] == f"CPU · busiest lab-{LAPTOPS}: {10 + LAPTOPS - 1} %"
        assert strip["labels"][-1] == f"▶ lab-{LAPTOPS}" and strip["outlined"] == [LAPTOPS - 1]
        assert wait_for_newest(page, "ram", [25.0] * LAPTOPS)["names"] == names
        assert wait_for_newest(page, "net", [0.75] * LAPTOPS)["names"] == names

        page.wait_for_timeout(1100)  # the next second's samples, with another laptop the busiest
        strip = wait_for_newest(page, "cpu", send_round(nodes, lambda i: 90.0 if i == 1 else 20.0 + i))
        assert strip["title"] == "CPU · busiest lab-2: 90 %"
        assert strip["labels"][1] == "▶ lab-2" and strip["labels"][-1] == f"lab-{LAPTOPS}"
        assert "Fullest memory: lab-1, 1.0 of 4.0 GiB." == page.inner_text("#heat-strip .memory-note")
        assert violations(page) == []


def test_an_offline_laptops_row_says_so_and_stops_until_it_is_back(alice, web_server):
    lab, other = (Node.objects.create(name=name, host="192.0.2.1", username="u", host_key=KEY)
                  for name in ("lab-1", "lab-2"))
    with browser_page() as page:
        log_in(page, web_server, "alice", PASSWORD)
        page.wait_for_function(f"() => ({STRIP})('cpu') !== null")
        page.wait_for_timeout(1000)  # the socket joins the dashboard's group
        send_round([lab, other], lambda i: 40.0)
        wait_for_newest(page, "cpu", [40.0, 40.0])
        tell("dashboard.state", {"node": lab.pk, "name": lab.name, "state": "offline", "t": time.time()})
        page.wait_for_timeout(1100)
        send_round([other], lambda i: 41.0)  # the others go on; the offline row has no value from now on
        strip = wait_for_newest(page, "cpu", [None, 41.0])
        assert strip["labels"] == ["lab-1 (offline)", "▶ lab-2"]
        assert "Offline" in page.inner_text(f"[data-node-state='{lab.pk}']")
        send_round([lab, other], lambda i: 42.0 + i)
        strip = wait_for_newest(page, "cpu", [42.0, 43.0])
        assert strip["labels"] == ["lab-1", "▶ lab-2"]
        assert "Ready" in page.inner_text(f"[data-node-state='{lab.pk}']")
