"""Bytes into the laptops for one deployment of a model of small tensors: upstream's RPC client against the one
patched by scripts/llama_patches/0002 (every weight asked for by hash), side by side in one run.

A qwen2 test model whose layer tensors are all under the rpc cache's 10 MiB (f16, 4.5 MiB feed-forward
tensors; only output.weight is bigger), split evenly over simulated laptops behind 1 Gbit links, with the
panel's own supervisor and engines. Both clients are compiled here the same way (bench/rpc_clients.py) into
copies of the head's library folder; the laptops keep the installed runtime. For each client, in order (the
clients alternate, round after round):

  cold      empty caches, pre-seeding on (the panel's default)
  redeploy  the same again, caches as the first left them
  no seed   empty caches, pre-seeding off

Counted: bytes each laptop's eth0 received (inside its namespace; frames with their headers, SSH and all),
from the deployment's creation to its engine's model loaded, by step: pre-seeding, the verification load,
the engine's load. Set against the weights the plan puts on the laptops (their layers and the output); and
the seconds from creation to the engine's model loaded (the runtime is installed before the first).

    .venv/bin/python bench/load_bytes.py [--laptops 4] [--layers 16] [--rounds 2] [--bundled]
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
sys.path.insert(0, str(ROOT))
SCENARIOS = (("cold", True, True), ("redeploy", True, False), ("no seed", False, True))  # name, preseed, empty


def rx_bytes(laptop) -> int:
    out = subprocess.run(["ip", "netns", "exec", laptop.netns, "cat", "/sys/class/net/eth0/statistics/rx_bytes"],
                         capture_output=True, text=True, check=True).stdout
    return int(out)


def received(lan) -> int:
    return sum(rx_bytes(laptop) for laptop in lan.laptops)


def weights_on_laptops(deployment) -> int:
    """Bytes of every tensor the plan puts on a laptop, whatever their size."""
    from models_app.deploying import tensor_cache

    model, plan = deployment.model, deployment.plan
    every = tensor_cache.cached_tensors(Path(model.path), threshold=0)
    devices = tensor_cache.tensors_per_device(every, "output.weight" in every, model.n_layer, plan["n_gpu_layers"],
                                              tuple(plan["tensor_split"]))
    return sum(t["size"] for device in devices for t in device.values())


def deploy_once(model, nodes, lan, preseed: bool) -> dict:
    """One deployment to its engine's model loaded, bytes and seconds per step; then stopped, nothing left."""
    from models_app.deploying import deploy
    from models_app.models import Deployment, DeploymentStatus

    marks, real_fill, real_verify = {}, deploy.fill_caches, deploy.verify_load

    def mark(name: str) -> None:
        marks[name] = (received(lan), time.perf_counter())

    def fill(*args):
        real_fill(*args)
        mark("seeded")

    def verify(*args):
        if "seeded" not in marks:
            mark("seeded")
        real_verify(*args)
        mark("verified")

    deploy.fill_caches, deploy.verify_load = fill, verify
    try:
        mark("start")
        deployment = deploy.create(model, nodes, 512, "even", preseed=preseed)
        deploy.prepare(deployment)
    finally:
        deploy.fill_caches, deploy.verify_load = real_fill, real_verify
    deployment.refresh_from_db()
    if deployment.status != DeploymentStatus.READY:
        raise SystemExit(f"deployment failed: {deployment.status_detail}")
    wait(lambda: Deployment.objects.get(pk=deployment.pk).engine.get("state") == "ready", 300, "the engine")
    mark("loaded")
    stop(deployment)
    steps = {"preseed": ("start", "seeded"), "verify": ("seeded", "verified"), "engine": ("verified", "loaded")}
    row = {"weights": weights_on_laptops(deployment), "seconds": marks["loaded"][1] - marks["start"][1]}
    for step, (since, until) in steps.items():
        row[step] = marks[until][0] - marks[since][0]
        row[f"{step}_s"] = marks[until][1] - marks[since][1]
    return row


def stop(deployment) -> None:
    from models_app.deploying import deploy
    from nodes.models import RpcServer, ServerStatus

    worker = (deployment.__class__.objects.get(pk=deployment.pk).engine or {}).get("worker")
    deploy.stop(deployment)
    wait(lambda: not RpcServer.objects.exclude(status=ServerStatus.STOPPED).exists(), 60, "the servers to stop")
    wait(lambda: not worker or not Path(f"/proc/{worker}").exists(), 60, "the engine to stop")


def wait(check, within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"waited {within:.0f} s for {what}")
        time.sleep(0.2)


def run_client(lib: Path, model, nodes, lan) -> dict[str, dict]:
    """Every scenario with the head using the RPC client in `lib` (its supervisor, hence engines, too)."""
    os.environ["LLAMA_CPP_LIB_PATH"] = str(lib)
    supervisor = subprocess.Popen([sys.executable, "manage.py", "supervise", "--interval", "0.5"], cwd=ROOT,
                                  env={**os.environ})
    try:
        results = {}
        for name, preseed, empty in SCENARIOS:
            if empty:
                for laptop in lan.laptops:
                    shutil.rmtree(Path(laptop.home) / ".clusterpanel" / "cache" / "rpc", ignore_errors=True)
            results[name] = deploy_once(model, nodes, lan, preseed)
        return results
    finally:
        supervisor.terminate()
        supervisor.wait()
        del os.environ["LLAMA_CPP_LIB_PATH"]


def run_rounds(libs: dict[str, Path], model, nodes, lan, rounds: int) -> dict[str, dict[str, list[dict]]]:
    """The clients in alternating rounds: the machine is shared, and its load drifts."""
    results = {client: {name: [] for name, _, _ in SCENARIOS} for client in libs}
    for _ in range(rounds):
        for client, lib in libs.items():
            for name, row in run_client(lib, model, nodes, lan).items():
                results[client][name].append(row)
    return results


def report(results: dict[str, dict[str, list[dict]]], model, thresholds: dict[str, int], args) -> None:
    weights = next(iter(next(iter(results.values())).values()))[0]["weights"]
    print(f"\n{model.name}: {model.n_layer} layers, {model.size / 2**20:.0f} MiB file, {weights / 2**20:.0f} MiB of "
          f"weights on {args.laptops} laptops (split evenly; the token embedding stays on the head); "
          f"{args.rounds} rounds, medians\n")
    print("| RPC client | scenario | pre-seed MiB | verification load MiB | engine load MiB | total MiB "
          "| total / weights on laptops | pre-seed s | verification s | engine load s | to engine loaded s |")
    print("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for client, scenarios in results.items():
        label = f"{client} (by hash over {thresholds[client] / 2**20:g} MiB)"
        for name, rows in scenarios.items():
            med = {key: statistics.median(row[key] for row in rows) for key in rows[0]}
            total = statistics.median(row["preseed"] + row["verify"] + row["engine"] for row in rows)
            print(f"| {label} | {name} | {med['preseed'] / 2**20:.0f} | {med['verify'] / 2**20:.0f} | "
                  f"{med['engine'] / 2**20:.0f} | {total / 2**20:.0f} | {total / weights:.2f} | "
                  f"{med['preseed_s']:.1f} | {med['verify_s']:.1f} | {med['engine_s']:.1f} | {med['seconds']:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--laptops", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--bundled", action="store_true", help="the bundled SmolLM2 (30 layers of 2.1 MiB) instead")
    args = parser.parse_args()
    data = Path(tempfile.mkdtemp(prefix="bench-load-bytes-"))
    os.chmod(data, 0o755)
    os.environ.update(DATA_DIR=str(data), DJANGO_SETTINGS_MODULE="clusterpanel.settings")
    from clusterpanel.run.redis_server import RedisServer

    redis = RedisServer.start(data / "redis")
    os.environ["REDIS_URL"] = redis.url
    harness = None
    try:
        import django

        django.setup()
        from django.core.management import call_command

        from bench import rpc_clients
        from models_app.deploying import tensor_cache
        from models_app.library.adding import ensure_bundled, register_path
        from nodes.models import Node
        from nodes.simlan.lan import SimLan
        from tests.models_app.gguf_files import write_loadable_model

        libs = {"upstream": rpc_clients.build("upstream", [], data / "clients"),
                "0002": rpc_clients.build("0002", sorted((ROOT / "scripts" / "llama_patches").glob("0002-*.patch")),
                                          data / "clients")}
        thresholds = {}
        for client, lib in libs.items():
            os.environ["LLAMA_CPP_LIB_PATH"] = str(lib)
            thresholds[client] = tensor_cache.hash_threshold()
        del os.environ["LLAMA_CPP_LIB_PATH"]
        call_command("migrate", verbosity=0)
        if args.bundled:
            model = ensure_bundled()
        else:
            model = register_path(write_loadable_model(data / "small.gguf", layers=args.layers, ffn=3072),
                                  name="qwen2-small-tensors")
        harness = SimLan("ldbytes", data / "simlan", subnet="10.251.0.0/24")
        lan = harness.up(args.laptops, rate="1gbit")
        key = Path(lan.key_path).read_text()
        nodes = [Node.objects.create(name=laptop.name, host=laptop.address, username=laptop.user,
                                     host_key=laptop.host_key, private_key=key, usable_memory=4 * 2**30)
                 for laptop in lan.laptops]
        from models_app.deploying import deploy

        for node in nodes:  # the runtime's own bytes are no part of a load
            deploy.ensure_runtime(node)
        report(run_rounds(libs, model, nodes, lan, args.rounds), model, thresholds, args)
    finally:
        if harness:
            harness.down()
        redis.stop()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
