"""The dashboard at lab scale in a real Chromium: 39 simulated laptops, the real metrics collector, and this
tree's dashboard beside an older one's (`--before`), both served from one scratch data folder and fed by the
same collector, measured one after the other in alternating rounds.

Per page: the time until the first chart shows data, the share of the page's main thread spent in tasks
(Chrome's own TaskDuration over a steady window), how long a trivial script call waits for that thread, and
per laptop how often its newest sample on the page moved (1-s looks) and how old that newest sample was.
Besides: the collector's CPU (% of one core) over the whole run.

    .venv/bin/python bench/dashboard_at_scale.py [--laptops 39] [--seconds 30] [--rounds 2] [--before REV]
        [--shots docs/screenshots]
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from harness import end, free_port, wait_port  # noqa: E402
from metrics_fanout import cpu_seconds  # noqa: E402

# The newest sample each laptop shows on the CPU chart, as epoch seconds, read the way each side draws it:
# the older dashboard has one line per laptop, this one a heat-strip row per laptop.
NEWEST = {
    "before": """() => { const chart = document.querySelector("#cluster-charts [data-chart=cpu]");
      return Object.fromEntries((chart && chart.data || []).map((trace) => {
        let i = trace.x.length - 1; while (i >= 0 && trace.y[i] === null) i--;
        return [trace.name.replace(" (offline)", ""), i < 0 ? null : new Date(trace.x[i]).getTime() / 1000]; })); }""",
    "after": """() => { const strip = document.querySelector("#heat-strip [data-strip=cpu]");
      const trace = strip && strip.data && strip.data[0]; if (!trace || !trace.z) return {};
      return Object.fromEntries(trace.y.map((name, row) => {
        const z = trace.z[row] || []; let i = z.length - 1; while (i >= 0 && z[i] === null) i--;
        return [name, i < 0 ? null : trace.x[i] / 1000]; })); }""",
}
SHOWN = "(newest) => Object.values(newest()).some((t) => t !== null)"
# One call per look, so that nothing is asked of a swamped page after the window: its calls wait for minutes.
LOOK = """() => [({newest})(), window.longTasks.reduce((sum, d) => sum + d, 0) / performance.now()]"""
LONG_TASKS = """window.longTasks = [];
new PerformanceObserver((list) => window.longTasks.push(...list.getEntries().map((e) => e.duration)))
  .observe({ type: "longtask", buffered: true });"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--laptops", type=int, default=39)
    parser.add_argument("--seconds", type=int, default=30, help="steady window per page and round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--before", default="main", help="git revision to compare with")
    parser.add_argument("--sides", default="before,after", help="which pages to measure")
    parser.add_argument("--profile", action="store_true", help="name the page's own functions that cost most")
    parser.add_argument("--shots", help="folder for dashboard-<laptops>.png (this tree's page, desktop and phone)")
    args = parser.parse_args()
    data = Path(tempfile.mkdtemp(prefix="bench-dash-"))
    os.chmod(data, 0o755)
    before = data / "before-tree"
    subprocess.run(["git", "worktree", "add", "-q", "--detach", str(before), args.before], cwd=ROOT, check=True)
    os.environ.update(DATA_DIR=str(data), DJANGO_SETTINGS_MODULE="clusterpanel.settings")
    sys.path.insert(0, str(ROOT))
    from clusterpanel.run.redis_server import RedisServer

    redis = RedisServer.start(data / "redis")
    os.environ["REDIS_URL"] = redis.url
    processes, harness = [], None
    try:
        cookie, harness = lab(data, args.laptops)
        ports = {}
        for side, tree in {"before": before, "after": ROOT}.items():
            if side not in args.sides:
                continue
            ports[side], process = serve(tree, data / f"static-{side}")
            processes.append(process)
        collector = subprocess.Popen([sys.executable, "manage.py", "metrics"], cwd=ROOT, env={**os.environ},
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        processes.append(collector)
        for port in ports.values():
            wait_port(port, within=60)
        wait_for_samples(args.laptops)
        spent, started = cpu_seconds(collector.pid), time.monotonic()
        results = measure(ports, cookie, args)
        collector_cpu = 100 * (cpu_seconds(collector.pid) - spent) / (time.monotonic() - started)
        report(results, collector_cpu, args)
    finally:
        for process in processes:
            end(process)
        if harness:
            harness.down()
        redis.stop()
        subprocess.run(["git", "worktree", "remove", "--force", str(before)], cwd=ROOT)
        shutil.rmtree(data, ignore_errors=True)


def lab(data: Path, laptops: int):
    """An admin's session cookie and the simulated laptops, registered as ready (the collector samples them)."""
    import django

    django.setup()
    from django.core.management import call_command
    from django.test import Client

    from clusterpanel.accounts.models import Role, User
    from nodes.models import Node, NodeStatus
    from nodes.simlan.lan import SimLan

    call_command("migrate", verbosity=0)
    admin = User.objects.create_user("bench", password="bench-password-1", role=Role.ADMIN)
    client = Client()
    client.force_login(admin)
    harness = SimLan("dscale", data / "simlan", subnet="10.247.0.0/24")
    lan = harness.up(laptops)
    key = Path(lan.key_path).read_text()
    for laptop in lan.laptops:
        Node.objects.create(name=laptop.name, host=laptop.address, username=laptop.user, host_key=laptop.host_key,
                            private_key=key, status=NodeStatus.READY)
    return client.cookies["sessionid"].value, harness


def serve(tree: Path, static_root: Path) -> tuple[int, subprocess.Popen]:
    env = {**os.environ, "STATIC_ROOT": str(static_root)}
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], cwd=tree, env=env, check=True)
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "clusterpanel.web.webserver", "-b", "127.0.0.1", "-p", str(port),
                                "clusterpanel.asgi:application"], cwd=tree, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return port, process


def wait_for_samples(laptops: int, within: float = 120) -> None:
    """Until every laptop has a minute of samples in Redis, as a lab's dashboard would find it."""
    from nodes.metrics import store as metrics
    from nodes.models import Node

    ids = list(Node.objects.values_list("pk", flat=True))
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if all(len(metrics.recent(pk, 600)) >= 60 for pk in ids):
            return
        time.sleep(2)
    heard = sum(1 for pk in ids if metrics.recent(pk, 600))
    raise SystemExit(f"only {heard} of {laptops} laptops sent samples within {within:.0f} s")


def measure(ports: dict[str, int], cookie: str, args) -> dict:
    from playwright.sync_api import sync_playwright

    results: dict = {}
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=shutil.which("chromium"), headless=True,
                                              args=["--no-sandbox", "--disable-gpu"])
        for _ in range(args.rounds):
            for side, port in ports.items():
                results.setdefault(side, []).append(one_visit(chromium, side, port, cookie, args.seconds,
                                                                      args.profile))
        if args.shots:
            shoot(chromium, ports["after"], cookie, Path(args.shots), args.laptops)
        chromium.close()
    return results


def one_visit(chromium, side: str, port: int, cookie: str, seconds: int, profile: bool) -> dict:
    base = f"http://127.0.0.1:{port}"
    context = chromium.new_context(viewport={"width": 1440, "height": 900})
    context.add_cookies([{"name": "sessionid", "value": cookie, "url": base}])
    context.add_init_script(LONG_TASKS)
    page = context.new_page()
    cdp = context.new_cdp_session(page)
    cdp.send("Performance.enable")
    if profile:  # a JS profile from navigation on: which of the page's own functions hold its main thread
        cdp.send("Profiler.enable")
        cdp.send("Profiler.start")
    loading = renderer_cpu(chromium)
    page.goto(base + "/", wait_until="commit")
    try:
        page.wait_for_function(f"() => ({SHOWN})({NEWEST[side]})", timeout=60_000, polling=50)
        first_chart_ms = page.evaluate("() => performance.now()")
        first_chart_cpu = spent(loading, renderer_cpu(chromium))
    except Exception:  # noqa: BLE001 (a page that never shows data is a result too)
        first_chart_ms = first_chart_cpu = None
    visit = {"first_chart_ms": first_chart_ms, "first_chart_cpu": first_chart_cpu, "moved": [], "age": [],
             "call_ms": [], "long_tasks": 0.0}
    busy_from, wall_from, cpu_from = task_seconds(cdp), time.monotonic(), renderer_cpu(chromium)
    previous: dict = {}
    while time.monotonic() - wall_from < seconds:
        asked = time.monotonic()
        newest, visit["long_tasks"] = page.evaluate(LOOK.format(newest=NEWEST[side]))
        visit["call_ms"].append(1000 * (time.monotonic() - asked))
        now = time.time()
        for name, t in newest.items():
            if name in previous:
                visit["moved"].append(t is not None and t != previous[name])
            if t is not None:
                visit["age"].append(now - t)
        previous = newest
        time.sleep(max(0.0, 1 - (time.monotonic() - asked)))
    elapsed = time.monotonic() - wall_from
    visit["busy"] = (task_seconds(cdp) - busy_from) / elapsed
    visit["renderer"] = spent(cpu_from, renderer_cpu(chromium)) / elapsed
    visit["laptops_shown"] = len(previous)
    if profile:
        visit["own_code"] = own_code(cdp.send("Profiler.stop")["profile"])
    context.close()
    return visit


def own_code(profile: dict) -> dict[str, float]:
    """The panel's own functions (static/js) by share of the profile's samples spent in them or what they call."""
    nodes = {node["id"]: node for node in profile["nodes"]}
    hits = {node_id: 0 for node_id in nodes}
    for sample in profile["samples"]:
        hits[sample] += 1
    inclusive: dict[int, int] = {}

    def total(node_id: int) -> int:
        if node_id not in inclusive:
            node = nodes[node_id]
            inclusive[node_id] = hits[node_id] + sum(total(child) for child in node.get("children", []))
        return inclusive[node_id]

    shares: dict[str, float] = {}
    for node_id, node in nodes.items():
        frame = node["callFrame"]
        if "/static/js/" in frame["url"]:
            name = f"{frame['url'].rsplit('/', 1)[1].split('.')[0]}.js {frame['functionName'] or '(top)'}"
            shares[name] = shares.get(name, 0) + total(node_id) / max(1, len(profile["samples"]))
    return shares


SESSIONS: dict = {}  # a browser's own CDP session


def renderer_cpu(chromium) -> dict[int, float]:
    """CPU seconds of every renderer (one page is open at a time): unlike a task's duration, not counting time
    the thread waited for a core, which on a busy machine is most of it."""
    if chromium not in SESSIONS:
        SESSIONS[chromium] = chromium.new_browser_cdp_session()
    processes = SESSIONS[chromium].send("SystemInfo.getProcessInfo")["processInfo"]
    return {p["id"]: p["cpuTime"] for p in processes if p["type"] == "renderer"}


def spent(since: dict, now: dict) -> float:
    """CPU seconds the renderers now alive used since `since` (a page's renderer may start or end between)."""
    return sum(cpu - since.get(pid, 0.0) for pid, cpu in now.items())


def task_seconds(cdp) -> float:
    metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    return metrics["TaskDuration"]


def shoot(chromium, port: int, cookie: str, folder: Path, laptops: int) -> None:
    base = f"http://127.0.0.1:{port}"
    for suffix, viewport in {"": (1440, 900), "-phone": (390, 844)}.items():
        context = chromium.new_context(viewport=dict(zip(("width", "height"), viewport, strict=True)))
        context.add_cookies([{"name": "sessionid", "value": cookie, "url": base}])
        page = context.new_page()
        page.goto(base + "/")
        page.wait_for_function(f"() => ({SHOWN})({NEWEST['after']})", timeout=60_000)
        page.wait_for_timeout(3000)
        page.screenshot(path=str(folder / f"dashboard-{laptops}{suffix}.png"), full_page=True)
        context.close()


def report(results: dict, collector_cpu: float, args) -> None:
    def pooled(visits: list, field: str) -> list:
        return sorted(value for visit in visits for value in visit[field])

    def pick(values: list, q: float) -> float:
        return values[min(len(values) - 1, int(len(values) * q))] if values else float("nan")

    def median(visits: list, field: str) -> float:
        return statistics.median(v[field] for v in visits)

    def first(visits: list) -> str:
        times = [v["first_chart_ms"] for v in visits]
        return "never" if None in times else f"{statistics.median(times) / 1000:.2f} s"

    rows = {
        "first chart shows data (median)": first,
        "renderer CPU until the first chart (median)": lambda v: "never" if None in [x["first_chart_cpu"] for x in v]
        else f"{median(v, 'first_chart_cpu'):.2f} s",
        "page's renderer CPU, % of one core": lambda v: f"{100 * median(v, 'renderer'):.0f} %",
        "main thread in tasks (wall time), % of the window": lambda v: f"{100 * median(v, 'busy'):.0f} %",
        "in long tasks since navigation": lambda v: f"{100 * median(v, 'long_tasks'):.0f} %",
        "trivial script call, p50 / max": lambda v: f"{pick(pooled(v, 'call_ms'), .5):.0f} / "
                                                    f"{max(pooled(v, 'call_ms')):.0f} ms",
        "laptops shown on the CPU chart": lambda v: f"{min(x['laptops_shown'] for x in v)} of {args.laptops}",
        "laptop's newest sample moved, % of 1-s looks": lambda v: f"{100 * statistics.fmean(pooled(v, 'moved') or [0]):.0f} %",  # noqa: E501
        "age of a laptop's newest sample, p50 / p99": lambda v: f"{pick(pooled(v, 'age'), .5):.1f} / "
                                                                f"{pick(pooled(v, 'age'), .99):.1f} s",
    }
    sides = list(results)
    print(f"{args.laptops} simulated laptops sampled at 1 Hz by the real collector; {args.rounds} round(s) of one "
          f"dashboard page per side, {args.seconds}-s steady window, Chromium at 1440×900; before = {args.before}\n")
    print("| measure | " + " | ".join(sides) + " |")
    print("|---|" + "--:|" * len(sides))
    for name, value in rows.items():
        print(f"| {name} | " + " | ".join(value(results[side]) for side in sides) + " |")
    print(f"\nmetrics collector over the whole run: {collector_cpu:.1f} % of one core")
    for side in sides if args.profile else []:
        shares: dict[str, float] = {}
        for visit in results[side]:
            for name, share in visit["own_code"].items():
                shares[name] = shares.get(name, 0) + share / len(results[side])
        top = sorted(shares.items(), key=lambda item: -item[1])[:6]
        print(f"\n{side}: the page's own functions by share of the profile (time in them and what they call): "
              + "; ".join(f"{name} {100 * share:.0f} %" for name, share in top))


if __name__ == "__main__":
    main()
