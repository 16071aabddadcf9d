"""Time to READY for one model over three laptops: cold, warm with pre-seeded caches, and a plain load.

Three simulated laptops behind 1 Gbit links, the panel's own supervisor, and a
qwen2 test model (f16, 10.5 MiB feed-forward tensors) with enough layers that
moving weights dominates. Each round, in this order:

  cold   nothing on the laptops (no runtime, empty cache); pre-seeding on
  warm   a redeploy: runtime and pre-seeded caches already there; pre-seeding on
  plain  runtime there, caches emptied, pre-seeding off: the load sends every byte

    .venv/bin/python bench/time_to_ready.py [--rounds 2] [--layers 24]
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
SCENARIOS = ("cold", "warm", "plain")


def rx_bytes(laptop) -> int:
    out = subprocess.run(["ip", "netns", "exec", laptop.netns, "cat", "/sys/class/net/eth0/statistics/rx_bytes"],
                         capture_output=True, text=True, check=True).stdout
    return int(out)


def clear(lan, what: str) -> None:
    for laptop in lan.laptops:
        folder = Path(laptop.home) / ".clusterpanel"
        shutil.rmtree(folder if what == "everything" else folder / "cache" / "rpc", ignore_errors=True)


def deploy_once(model, nodes, lan, preseed: bool) -> dict:
    from models_app.deploying import deploy
    from models_app.models import DeploymentStatus
    from nodes.models import RpcServer, ServerStatus

    before = sum(rx_bytes(laptop) for laptop in lan.laptops)
    started = time.perf_counter()
    deployment = deploy.create(model, nodes, 512, "even", preseed=preseed)
    deploy.prepare(deployment)
    seconds = time.perf_counter() - started
    received = sum(rx_bytes(laptop) for laptop in lan.laptops) - before
    deployment.refresh_from_db()
    if deployment.status != DeploymentStatus.READY:
        raise SystemExit(f"deployment failed: {deployment.status_detail}")
    deploy.stop(deployment)
    deadline = time.monotonic() + 60
    while RpcServer.objects.exclude(status=ServerStatus.STOPPED).exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    stages = list(deployment.stages.all())
    copied = sum(stage.preseed.get("sent", 0) for stage in stages)
    step = max((stage.preseed.get("seconds", 0) for stage in stages), default=0)
    return {"seconds": seconds, "received": received, "preseeded": copied, "step": step}


def run_rounds(model, nodes, lan, rounds: int) -> dict[str, list[dict]]:
    results = {name: [] for name in SCENARIOS}
    for _ in range(rounds):
        clear(lan, "everything")
        results["cold"].append(deploy_once(model, nodes, lan, preseed=True))
        results["warm"].append(deploy_once(model, nodes, lan, preseed=True))
        clear(lan, "cache")
        results["plain"].append(deploy_once(model, nodes, lan, preseed=False))
    return results


def report(results: dict[str, list[dict]], model, args) -> None:
    plain = statistics.median(r["seconds"] for r in results["plain"])
    print(f"\n{model.name}: {model.n_layer} layers, {model.size / 2**20:.0f} MiB, over 3 simulated laptops behind "
          f"1 Gbit links, split evenly; {args.rounds} rounds, medians\n")
    print("| scenario | time to READY s (median, min–max) | ratio to plain load | pre-seed step s "
          "| MB received by laptops | of which pre-seeded |")
    print("|---|---|---|---|---|---|")
    labels = {"cold": "cold: no runtime, empty cache, pre-seed on", "warm": "warm redeploy, pre-seeded caches",
              "plain": "plain load: cache emptied, pre-seed off"}
    for name in SCENARIOS:
        times = [r["seconds"] for r in results[name]]
        median = statistics.median(times)
        received = statistics.median(r["received"] for r in results[name]) / 1e6
        copied = statistics.median(r["preseeded"] for r in results[name]) / 1e6
        step = statistics.median(r["step"] for r in results[name])
        print(f"| {labels[name]} | {median:.1f} ({min(times):.1f}–{max(times):.1f}) | {median / plain:.2f} | "
              f"{step:.1f} | {received:.0f} | {copied:.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--layers", type=int, default=24)
    args = parser.parse_args()
    data = Path(tempfile.mkdtemp(prefix="bench-ttr-"))
    os.chmod(data, 0o755)
    os.environ.update(DATA_DIR=str(data), DJANGO_SETTINGS_MODULE="clusterpanel.settings")
    sys.path.insert(0, str(ROOT))
    from clusterpanel.run.redis_server import RedisServer

    redis = RedisServer.start(data / "redis")
    os.environ["REDIS_URL"] = redis.url
    harness, supervisor = None, None
    try:
        import django

        django.setup()
        from django.core.management import call_command

        from models_app.library.adding import register_path
        from nodes.models import Node
        from nodes.simlan.lan import SimLan
        from tests.models_app.gguf_files import write_loadable_model

        call_command("migrate", verbosity=0)
        model = register_path(write_loadable_model(data / "qwen2.gguf", layers=args.layers), name="qwen2-test",
                              checksum_now=True)
        harness = SimLan("ttr", data / "simlan", subnet="10.241.0.0/24")
        lan = harness.up(3, rate="1gbit")
        key = Path(lan.key_path).read_text()
        nodes = [Node.objects.create(name=laptop.name, host=laptop.address, username=laptop.user,
                                     host_key=laptop.host_key, private_key=key, usable_memory=4 * 2**30)
                 for laptop in lan.laptops]
        supervisor = subprocess.Popen([sys.executable, "manage.py", "supervise", "--interval", "0.5"], cwd=ROOT,
                                      env={**os.environ})
        report(run_rounds(model, nodes, lan, args.rounds), model, args)
    finally:
        if supervisor:
            supervisor.terminate()
            supervisor.wait()
        if harness:
            harness.down()
        redis.stop()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
