"""Live metrics at lab scale: 30 simulated laptops sampled at 1 Hz, pushed to a dashboard WebSocket.

Runs the panel's own processes (Redis, daphne, `manage.py metrics`) on a scratch
data folder, connects a real WebSocket client to /ws/dashboard/ as a lab admin,
and reports the CPU the panel's processes used (% of one core), the delivered
rate per laptop, and the sample-to-WebSocket latency (laptop clock = panel
clock here; both run on this machine).

    .venv/bin/python bench/metrics_fanout.py [--laptops 30] [--seconds 120]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    children = [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    own = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return own + sum(cpu_seconds(child) for child in children if Path(f"/proc/{child}").exists())


def wait_port(port: int) -> None:
    import socket

    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"nothing listens on {port}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--laptops", type=int, default=30)
    parser.add_argument("--seconds", type=int, default=120)
    args = parser.parse_args()
    data = Path(tempfile.mkdtemp(prefix="bench-fanout-"))
    os.chmod(data, 0o755)
    os.environ.update(DATA_DIR=str(data), DJANGO_SETTINGS_MODULE="clusterpanel.settings")
    sys.path.insert(0, str(ROOT))
    from clusterpanel.run.redis_server import RedisServer

    redis = RedisServer.start(data / "redis")
    os.environ["REDIS_URL"] = redis.url
    processes, harness = [], None
    try:
        import django

        django.setup()
        from django.core.management import call_command
        from django.test import Client

        from clusterpanel.accounts.models import Role, User
        from nodes.models import Node
        from nodes.simlan.lan import SimLan

        call_command("migrate", verbosity=0)
        admin = User.objects.create_user("bench", password="bench-password-1", role=Role.ADMIN)
        client = Client()
        client.force_login(admin)
        cookie = f"sessionid={client.cookies['sessionid'].value}"
        harness = SimLan("fan", data / "simlan", subnet="10.236.0.0/24")
        lan = harness.up(args.laptops)
        key = Path(lan.key_path).read_text()
        for laptop in lan.laptops:
            Node.objects.create(name=laptop.name, host=laptop.address, username=laptop.user,
                                host_key=laptop.host_key, private_key=key)
        env = {**os.environ}
        web = subprocess.Popen([sys.executable, "-m", "clusterpanel.web.webserver", "-b", "127.0.0.1", "-p", "8765",
                                "clusterpanel.asgi:application"], cwd=ROOT, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        collector = subprocess.Popen([sys.executable, "manage.py", "metrics"], cwd=ROOT, env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        processes = [web, collector]
        wait_port(8765)
        result = measure(cookie, args.seconds, {"metrics collector": collector.pid, "web (daphne)": web.pid,
                                                "redis": redis.process.pid})
        report(result, args)
    finally:
        for process in processes:
            process.terminate()
            process.wait()
        if harness:
            harness.down()
        redis.stop()
        shutil.rmtree(data, ignore_errors=True)


def measure(cookie: str, seconds: int, pids: dict[str, int]) -> dict:
    from websockets.sync.client import connect

    received = []
    with connect("ws://127.0.0.1:8765/ws/dashboard/", additional_headers={"Cookie": cookie},
                 origin="http://127.0.0.1:8765") as socket:
        warm_until = time.time() + 10
        while time.time() < warm_until:
            socket.recv(timeout=5)
        before = {name: cpu_seconds(pid) for name, pid in pids.items()}
        started = time.time()
        while time.time() - started < seconds:
            message = json.loads(socket.recv(timeout=5))
            message["at"] = time.time()
            received.append(message)
        elapsed = time.time() - started
        after = {name: cpu_seconds(pid) for name, pid in pids.items()}
    return {"received": received, "elapsed": elapsed,
            "cpu": {name: 100 * (after[name] - before[name]) / elapsed for name in pids}}


def report(result: dict, args) -> None:
    samples = [m for m in result["received"] if m["type"] == "metrics"]
    latency = sorted((m["at"] - m["t"]) * 1000 for m in samples)
    hop = sorted((m["at"] - m["received"]) * 1000 for m in samples)
    per_node = {}
    for m in samples:
        per_node.setdefault(m["node"], []).append(m["t"])
    rates = [(len(ts) - 1) / (ts[-1] - ts[0]) for ts in per_node.values() if len(ts) > 1]
    pick = lambda values, q: values[min(len(values) - 1, int(len(values) * q))]  # noqa: E731
    print(f"{args.laptops} simulated laptops sampled at 1 Hz for {result['elapsed']:.0f} s, one dashboard "
          f"WebSocket client\n")
    print("| process | CPU, % of one core |")
    print("|---|---|")
    for name, percent in result["cpu"].items():
        print(f"| {name} | {percent:.1f} |")
    print(f"| all panel processes | {sum(result['cpu'].values()):.1f} |\n")
    print("| measure | p50 | p99 |")
    print("|---|---|---|")
    print(f"| laptop sample → WebSocket client, ms | {pick(latency, .5):.1f} | {pick(latency, .99):.1f} |")
    print(f"| collector → WebSocket client, ms | {pick(hop, .5):.1f} | {pick(hop, .99):.1f} |")
    print(f"\nlaptops heard: {len(per_node)} of {args.laptops}; delivered rate per laptop: "
          f"min {min(rates):.2f} Hz, median {statistics.median(rates):.2f} Hz")


if __name__ == "__main__":
    main()
