"""On-call models (issue 25): how long the scheduler takes to decide, and how long an asleep model keeps its first
request waiting.

`decision`: a scratch database (no laptops) with 30 probed laptops of 2 GiB usable and 10 on-call models of about
4.7 GiB (three laptops each; any ready laptop is their pool), nine of them loaded. Timed, in one process, round
after round: the choice for the tenth when three laptops are free (it loads there); when those three are offline,
so it must evict the least recently used idle deployment (two of the nine have jobs); when all nine have jobs
(it waits); the whole wake for a request (the choice, the rows, the records; rolled back each round); and the
periodic look-after with nothing to unload. The issue's target for a decision: under 50 ms.

`first-token`: a whole panel (bench/scratch_panel.py) on `--laptops` simulated laptops and the bundled model on
call over them; one streamed /v1 chat request (greedy, 8 tokens) each round, its time to first token and to its
headers, in three states taken in turn: asleep with the laptops' rpc caches emptied (cold: the pre-seed copies
every weight), asleep with the caches still holding the weights from the last load (pre-seeded), and already
loaded. Between rounds the model is unloaded as the idle look-after would (its deployment stopped, its
rpc-servers gone).

    .venv/bin/python bench/oncall.py decision [--rounds 20]
    .venv/bin/python bench/oncall.py first-token [--laptops 2] [--rounds 3]
    .venv/bin/python bench/oncall.py first-token --smallest   # 1 laptop, 1 round
"""

import argparse
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MiB, GiB = 2**20, 2**30
LAPTOPS, MODELS = 30, 10


def table(title: str, rows: dict[str, list[tuple[float, float]]]) -> None:
    """Wall time, and this process's CPU time (what the wall time would be on cores nothing else wants: SQLite
    runs in the process, so its work is counted)."""
    print(f"\n{title}\n\n| case | wall ms (median) | p95 | min–max | CPU ms (median) | rounds |\n"
          "|---|--:|--:|--:|--:|--:|")
    for case, found in rows.items():
        ms = sorted(wall * 1000 for wall, _ in found)
        p95 = ms[min(len(ms) - 1, round(0.95 * len(ms)))]
        cpu = statistics.median(cpu * 1000 for _, cpu in found)
        print(f"| {case} | {statistics.median(ms):.1f} | {p95:.1f} | {ms[0]:.1f}–{ms[-1]:.1f} | {cpu:.1f} | "
              f"{len(ms)} |")


def scratch_database() -> Path:
    data = Path(tempfile.mkdtemp(prefix="bench-oncall-"))
    os.environ.update(DATA_DIR=str(data), DJANGO_SETTINGS_MODULE="clusterpanel.settings")
    sys.path.insert(0, str(ROOT))
    return data


def lab() -> list:
    """30 laptops, 10 models on call, nine loaded (as if prepared, engines ready); the on-call rows."""
    from django.core.management import call_command

    from jobs.queue import wakeup
    from models_app.models import Deployment, GgufModel, OnCall
    from models_app.oncall.service import Settings, save
    from nodes.models import LinkCheck, Node, NodeStatus, Probe

    call_command("migrate", verbosity=0)
    for number in range(1, LAPTOPS + 1):
        node = Node.objects.create(name=f"lab-{number}", host=f"10.9.{number}.1", username="lab",
                                   host_key="ssh-ed25519 AAAA", status=NodeStatus.READY, speed_gb_s=8.0)
        Probe.objects.create(node=node, facts={"ram_available": 3 * GiB, "ram_limit": 3 * GiB})
        LinkCheck.objects.create(node=node, report={"rtt_median_ms": 0.3})
    for number in range(MODELS):
        model = GgufModel.objects.create(
            name=f"model-{number}", path=f"/nonexistent/{number}.gguf", size=1, status="ready",
            architecture="llama", n_layer=24, n_embd=2048, n_head=16, n_head_kv=4, context_length=4096,
            vocab_size=32000, file_type="Q4_0", layer_bytes=[190 * MiB] * 24,
            other_tensors={"token_embd.weight": 60 * MiB, "output.weight": 60 * MiB})
        save(model, Settings(None, ctx=1024))
    for number in range(MODELS - 1):
        deployment = wakeup.wake(f"model-{number}")
        Deployment.objects.filter(pk=deployment.pk).update(status="ready", engine={"state": "ready"})
    return list(OnCall.objects.select_related("model").order_by("model__name"))


def timed(rounds: int, run) -> list[tuple[float, float]]:
    """Seconds of wall time and of CPU time, each round."""
    run()  # the first call imports and fills caches: not counted
    found = []
    for _ in range(rounds):
        began, cpu = time.perf_counter(), time.process_time()
        run()
        found.append((time.perf_counter() - began, time.process_time() - cpu))
    return found


def decision(args) -> None:
    data = scratch_database()
    from clusterpanel.run.redis_server import RedisServer

    redis = RedisServer.start(data / "redis")
    os.environ["REDIS_URL"] = redis.url
    try:
        import django

        django.setup()
        measure_decisions(args)
    finally:
        redis.stop()
        shutil.rmtree(data, ignore_errors=True)


def measure_decisions(args) -> None:
    from django.db import transaction

    from jobs.models import Job, JobKind, JobStatus
    from jobs.queue import oncall_choice, wakeup
    from models_app.models import Deployment, DeploymentStage
    from nodes.models import Node

    on_call = lab()
    asleep = on_call[-1]
    loaded = list(Deployment.objects.filter(on_call=True).order_by("pk"))
    held = set(DeploymentStage.objects.values_list("node_id", flat=True))
    free = Node.objects.exclude(pk__in=held)

    def wake_rolled_back() -> None:
        with transaction.atomic():
            assert wakeup.wake(asleep.model.name) is not None
            transaction.set_rollback(True)

    def choice(expected: str):
        def run() -> None:
            found = oncall_choice.choose(asleep)
            assert (expected == "free" and found.plan and not found.evict) or (
                expected == "evict" and found.plan and found.evict) or (expected == "wait" and not found.plan), found
        return run

    for deployment in loaded[:2]:
        Job.objects.create(kind=JobKind.CHAT, deployment=deployment, status=JobStatus.RUNNING, messages=[])
    rows = {f"choose: 3 laptops free of {LAPTOPS}, 9 of {MODELS} models loaded": timed(args.rounds, choice("free")),
            "wake: the choice, its deployment, stages and record (rolled back)": timed(args.rounds, wake_rolled_back),
            "look-after: nothing idle long enough, nothing waiting": timed(args.rounds, wakeup.look_after)}
    free.update(status="offline")
    rows["choose: none free, evict the least recently used of 7 idle"] = timed(args.rounds, choice("evict"))
    for deployment in loaded[2:]:
        Job.objects.create(kind=JobKind.CHAT, deployment=deployment, status=JobStatus.QUEUED, messages=[])
    rows["choose: none free, all 9 with jobs: wait"] = timed(args.rounds, choice("wait"))
    table(f"The on-call scheduler's decisions, {LAPTOPS} laptops and {MODELS} on-call models "
          f"(target < 50 ms), {args.rounds} rounds", rows)


def first_token(args) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from scratch_panel import scratch_panel

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a kill still takes the panel and laptops down
    with scratch_panel(laptops=args.laptops, name="boncall", subnet="10.214.0.0/24") as panel:
        from clusterpanel.accounts.models import ApiToken, User
        from models_app.library.adding import ensure_bundled
        from models_app.oncall.service import Settings, save

        model = ensure_bundled()
        save(model, Settings(list(panel.nodes), ctx=1024))
        headers = {"Authorization": f"Bearer {ApiToken.issue(User.objects.get(username='bench'), 'bench')[1]}"}
        found: dict[str, list[tuple[float, float]]] = {"asleep, cold caches": [], "asleep, pre-seeded caches": [],
                                                       "already loaded": []}
        ask(panel, model.name, headers)  # the first load fills the caches and warms the panel: not counted
        for round_no in range(args.rounds):
            for state in found:
                if state != "already loaded":
                    unload(model, clear=state.endswith("cold caches"))
                found[state].append(ask(panel, model.name, headers))
                print(f"  round {round_no} {state:<26} {found[state][-1][1]:7.1f} s to the first token", flush=True)
        report(args, found)


def ask(panel, model: str, headers: dict) -> tuple[float, float]:
    """Seconds to the response's headers and to its first token, for one streamed request."""
    import http.client
    import json

    body = {"model": model, "stream": True, "max_tokens": 8, "temperature": 0,
            "messages": [{"role": "user", "content": "Name three colours."}]}
    connection = http.client.HTTPConnection("127.0.0.1", panel.port, timeout=900)
    began = time.monotonic()
    try:
        connection.request("POST", "/v1/chat/completions", body=json.dumps(body),
                           headers={"Content-Type": "application/json", **headers})
        response = connection.getresponse()
        headed = time.monotonic() - began
        if response.status != 200:
            raise SystemExit(f"HTTP {response.status}: {response.read(500).decode(errors='replace')}")
        for raw in response:
            if raw.startswith(b"data: ") and b'"content": "' in raw and b'"content": ""' not in raw:
                return headed, time.monotonic() - began
    finally:
        connection.close()
    raise SystemExit("the stream ended without a token")


def unload(model, clear: bool) -> None:
    """As the idle look-after unloads it; `clear`: the laptops' rpc caches emptied too (then a cold load)."""
    from models_app.deploying import deploy
    from models_app.models import Deployment
    from nodes.models import RpcServer
    from nodes.servers import cache as rpccache

    for deployment in Deployment.objects.filter(model=model, status__in=("ready", "degraded")):
        deploy.stop(deployment, detail="Unloaded by the benchmark.")
        nodes = [stage.node for stage in deployment.stages.select_related("node")]
        deadline = time.monotonic() + 60
        while RpcServer.objects.filter(stage__deployment=deployment, status="running").exists():
            if time.monotonic() > deadline:
                raise SystemExit("the rpc-servers did not stop within 60 s")
            time.sleep(0.2)
        if clear:
            for node in nodes:
                rpccache.clear(node.ssh_target(), node.install_dir)


def report(args, found: dict) -> None:
    print(f"\nOne streamed /v1 chat request (8 greedy tokens) to the bundled model on call over {args.laptops} "
          f"simulated laptop(s), {args.rounds} round(s), states in turn\n")
    print("| state | first token, s (median) | min–max | headers, s (median) |\n|---|--:|--:|--:|")
    for state, rows in found.items():
        tokens, headed = [row[1] for row in rows], [row[0] for row in rows]
        print(f"| {state} | {statistics.median(tokens):.1f} | {min(tokens):.1f}–{max(tokens):.1f} | "
              f"{statistics.median(headed):.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=("decision", "first-token"))
    parser.add_argument("--rounds", type=int, default=None, help="decision: 20; first-token: 3")
    parser.add_argument("--laptops", type=int, default=2)
    parser.add_argument("--smallest", action="store_true", help="first-token: 1 laptop, 1 round")
    args = parser.parse_args()
    if args.smallest:
        args.laptops, args.rounds = 1, 1
    args.rounds = args.rounds or (20 if args.part == "decision" else 3)
    (decision if args.part == "decision" else first_token)(args)


if __name__ == "__main__":
    main()
