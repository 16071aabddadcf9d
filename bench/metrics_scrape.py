"""How long a Prometheus scrape of /metrics takes at lab scale: 30 simulated laptops sampled at 1 Hz by the
panel's own collector, 3 deployments over them with their rpc-servers, a history of finished jobs and every
slot answering (its tokens counted from its stream in Redis), the panel's web server. /healthz is timed beside
it, in the same run, as the server's floor.

    .venv/bin/python bench/metrics_scrape.py [--laptops 30] [--scrapes 300] [--jobs 3000]
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
from datetime import timedelta
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from harness import free_port, wait_port  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--laptops", type=int, default=30)
    parser.add_argument("--scrapes", type=int, default=300)
    parser.add_argument("--jobs", type=int, default=3000, help="finished jobs per deployment")
    args = parser.parse_args()
    data = Path(tempfile.mkdtemp(prefix="bench-scrape-"))
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

        from nodes.simlan.lan import SimLan

        call_command("migrate", verbosity=0)
        harness = SimLan("scr", data / "simlan", subnet="10.237.0.0/24")
        lan = harness.up(args.laptops)
        token = lab(lan, args.jobs)
        port = free_port()
        env = {**os.environ}
        web = subprocess.Popen([sys.executable, "-m", "clusterpanel.web.webserver", "-b", "127.0.0.1", "-p", str(port),
                                "clusterpanel.asgi:application"], cwd=ROOT, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        collector = subprocess.Popen([sys.executable, "manage.py", "metrics"], cwd=ROOT, env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        processes = [web, collector]
        wait_port(port)
        report(measure(f"http://127.0.0.1:{port}", token, args.scrapes, args.laptops), args)
    finally:
        for process in processes:
            process.terminate()
            process.wait()
        if harness:
            harness.down()
        redis.stop()
        shutil.rmtree(data, ignore_errors=True)


def lab(lan, jobs_each: int) -> str:
    """30 laptops, 3 ready deployments of 10 each with running rpc-servers, finished jobs; a read-only admin
    token, as Prometheus would hold."""
    from django.utils import timezone

    from clusterpanel.accounts.models import ApiToken, Role, User
    from jobs.models import Job, JobKind, JobStatus, Tally
    from jobs.queue import stream
    from models_app.library.adding import ensure_bundled
    from models_app.models import Deployment, DeploymentStage, DeploymentStatus
    from nodes.models import Node, NodeStatus, RpcServer, ServerStatus

    admin = User.objects.create_user("bench", password="bench-password-1", role=Role.ADMIN)
    key = Path(lan.key_path).read_text()
    nodes = [Node.objects.create(name=laptop.name, host=laptop.address, username=laptop.user,
                                 host_key=laptop.host_key, private_key=key, status=NodeStatus.READY)
             for laptop in lan.laptops]
    model = ensure_bundled()
    now = timezone.now()
    for d in range(3):
        deployment = Deployment.objects.create(model=model, ctx=2048, slots=4, plan={}, status=DeploymentStatus.READY)
        for position, node in enumerate(nodes[d::3]):
            server = RpcServer.objects.create(node=node, port=50052, status=ServerStatus.RUNNING, restarts=position)
            DeploymentStage.objects.create(deployment=deployment, position=position, node=node, first_layer=position,
                                           layer_count=1, memory={}, server=server)
        Job.objects.bulk_create([
            Job(kind=JobKind.CHAT, deployment=deployment, user=admin, status=JobStatus.SUCCEEDED,
                messages=[{"role": "user", "content": "Hi"}], completion_tokens=64, prompt_tokens=20,
                started=now - timedelta(seconds=n + 5), first_token=now - timedelta(seconds=n + 4.5),
                finished=now - timedelta(seconds=n), time_to_first_token_s=0.5, duration_s=5.0)
            for n in range(jobs_each)])
        for _ in range(jobs_each):  # what the engine adds as each of them ends
            Tally.count_ended(deployment.pk, 64, {"time_to_first_token_s": 0.5, "duration_s": 5.0})
        for _ in range(deployment.slots):  # every slot answering, each 200 tokens in
            job = Job.objects.create(kind=JobKind.CHAT, deployment=deployment, user=admin, status=JobStatus.RUNNING,
                                     messages=[{"role": "user", "content": "Hi"}], started=now, attempts=1)
            events = [{"event": "status"}, *({"event": "token", "text": " a", "t": 0} for _ in range(200))]
            stream.store().rpush(stream.key(job.pk), *(json.dumps({"seq": n, **e}) for n, e in enumerate(events)))
    return ApiToken.issue(admin, "prometheus", read_only=True)[1]


def measure(base: str, token: str, scrapes: int, laptops: int) -> dict:
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {token}"
    deadline = time.monotonic() + 60
    while session.get(f"{base}/metrics", timeout=30).text.count("clusterpanel_node_cpu_ratio{") < laptops:
        if time.monotonic() > deadline:
            raise SystemExit("the collector did not sample every laptop within 60 s")
        time.sleep(1)
    times: dict[str, list[float]] = {"/metrics": [], "/healthz": []}
    size = 0
    for _ in range(scrapes):
        for path in times:  # interleaved: both see the same moments of a shared machine
            started = time.perf_counter()
            answer = session.get(f"{base}{path}", timeout=30)
            times[path].append((time.perf_counter() - started) * 1000)
            assert answer.status_code == 200, answer.text[:200]
            size = len(answer.content) if path == "/metrics" else size
        time.sleep(0.05)
    return {"times": times, "size": size}


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def report(result: dict, args) -> None:
    print(f"{args.laptops} simulated laptops sampled at 1 Hz, 3 ready deployments, {3 * args.jobs} finished jobs, "
          f"12 answering; "
          f"{args.scrapes} scrapes each, interleaved; /metrics is {result['size'] / 1024:.0f} KiB\n")
    print("| path | p50, ms | p99, ms | mean, ms |")
    print("|---|---:|---:|---:|")
    for path, values in result["times"].items():
        print(f"| {path} | {quantile(values, 0.5):.1f} | {quantile(values, 0.99):.1f} | "
              f"{statistics.fmean(values):.1f} |")
    metrics, floor = result["times"]["/metrics"], result["times"]["/healthz"]
    print(f"\n/metrics ÷ /healthz at p50: {quantile(metrics, 0.5) / quantile(floor, 0.5):.1f}×; "
          f"target p99 < 100 ms: {'met' if quantile(metrics, 0.99) < 100 else 'NOT met'}")


if __name__ == "__main__":
    main()
