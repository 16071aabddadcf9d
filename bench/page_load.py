"""How long the chart pages take to load, and what they download, in a real Chromium: this tree against an
older one (`--before`, default main), both served by the panel's own web server from one scratch data folder,
in alternating rounds. A cold load is a new browser profile; a warm one opens the page again in it.

    .venv/bin/python bench/page_load.py [--before main] [--rounds 5]
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from harness import end, free_port, wait_port  # noqa: E402

PAGES = {"dashboard": "/", "laptop": "/nodes/bench-1/", "model": "/models/{model}/",
         "plan": "/models/plan/?model={model_id}&ctx=512&mode=even", "laptops (no chart)": "/nodes/"}
FACTS = {"os": "Linux", "distro": "Debian 12", "kernel": "6.1", "arch": "x86_64", "glibc": "2.36", "glibcxx": "3.4.30",
         "cpu_model": "Intel Core i5-8250U", "physical_cores": 4, "logical_cores": 8, "cpu_flags": ["avx2"],
         "ram_total": 16 << 30, "ram_available": 12 << 30, "ram_limit": None, "swap_total": 0, "swap_used": 0,
         "disk_free": 100 << 30, "nic": "eth0", "on_ac": True, "battery_percent": None, "clock_offset_s": 0.1}
DRAWN = "() => document.readyState === 'complete' && (!window.Plotly || !!document.querySelector('.main-svg'))"
MEASURED = """() => { const nav = performance.getEntriesByType("navigation")[0];
  const all = [nav, ...performance.getEntriesByType("resource")];
  return { ms: performance.now(), bytes: all.reduce((sum, e) => sum + (e.transferSize || 0), 0) }; }"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", default="main", help="git revision to compare with")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    data = Path(tempfile.mkdtemp(prefix="bench-pages-"))
    before = data / "before-tree"
    subprocess.run(["git", "worktree", "add", "-q", "--detach", str(before), args.before], cwd=ROOT, check=True)
    os.environ.update(DATA_DIR=str(data), DJANGO_SETTINGS_MODULE="clusterpanel.settings")
    sys.path.insert(0, str(ROOT))
    from clusterpanel.run.redis_server import RedisServer

    redis = RedisServer.start(data / "redis")
    os.environ["REDIS_URL"] = redis.url
    servers = []
    try:
        cookie, model = lab()
        trees = {"before": before, "after": ROOT}
        ports = {}
        for side, tree in trees.items():
            port, process = serve(tree, data / f"static-{side}")
            ports[side] = port
            servers.append(process)
        for port in ports.values():
            wait_port(port, within=60)
        report(measure(ports, cookie, model, args.rounds), args)
    finally:
        for process in servers:
            end(process)
        redis.stop()
        subprocess.run(["git", "worktree", "remove", "--force", str(before)], cwd=ROOT)
        shutil.rmtree(data, ignore_errors=True)


def lab() -> tuple[str, str]:
    """An admin's session cookie; one laptop and the bundled model, so each chart page has its charts."""
    import django

    django.setup()
    from django.core.management import call_command
    from django.test import Client

    from clusterpanel.accounts.models import Role, User
    from models_app.library.adding import ensure_bundled
    from nodes.models import Node, NodeStatus, Probe

    call_command("migrate", verbosity=0)
    admin = User.objects.create_user("bench", password="bench-password-1", role=Role.ADMIN)
    for number in (1, 2, 3):
        node = Node.objects.create(name=f"bench-{number}", host=f"10.9.9.{number}", username="lab",
                                   host_key="ssh-ed25519 AAAA", status=NodeStatus.READY)
        Probe.objects.create(node=node, facts=FACTS)
    model = ensure_bundled()
    client = Client()
    client.force_login(admin)
    return client.cookies["sessionid"].value, model


def serve(tree: Path, static_root: Path) -> tuple[int, subprocess.Popen]:
    env = {**os.environ, "STATIC_ROOT": str(static_root)}
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], cwd=tree, env=env, check=True)
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "clusterpanel.web.webserver", "-b", "127.0.0.1", "-p", str(port),
                                "clusterpanel.asgi:application"], cwd=tree, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return port, process


def measure(ports: dict[str, int], cookie: str, model: str, rounds: int) -> dict:
    from playwright.sync_api import sync_playwright

    results: dict = {}
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=shutil.which("chromium"), headless=True,
                                              args=["--no-sandbox", "--disable-gpu"])
        for _ in range(rounds):
            for page_name, path in PAGES.items():
                for side, port in ports.items():
                    base = f"http://127.0.0.1:{port}"
                    context = chromium.new_context(viewport={"width": 1440, "height": 900})
                    context.add_cookies([{"name": "sessionid", "value": cookie, "url": base}])
                    page = context.new_page()
                    for visit in ("cold", "warm"):
                        page.goto(base + path.format(model=model.name, model_id=model.pk))
                        page.wait_for_function(DRAWN, timeout=60000)
                        results.setdefault((page_name, side, visit), []).append(page.evaluate(MEASURED))
                    context.close()
        chromium.close()
    return results


def report(results: dict, args) -> None:
    def median(page: str, side: str, visit: str, field: str) -> float:
        return statistics.median(r[field] for r in results[(page, side, visit)])

    print(f"{args.rounds} rounds, before = {args.before}; median time until the charts are drawn, and bytes "
          "over the wire\n")
    print("| page | cold before | cold after | ratio | warm before | warm after | bytes before | bytes after |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|")
    for page in PAGES:
        cold = [median(page, side, "cold", "ms") for side in ("before", "after")]
        warm = [median(page, side, "warm", "ms") for side in ("before", "after")]
        sent = [median(page, side, "cold", "bytes") for side in ("before", "after")]
        print(f"| {page} | {cold[0]:.0f} ms | {cold[1]:.0f} ms | {cold[1] / cold[0]:.2f} | {warm[0]:.0f} ms | "
              f"{warm[1]:.0f} ms | {sent[0] / 1e3:.0f} kB | {sent[1] / 1e3:.0f} kB |")


if __name__ == "__main__":
    main()
