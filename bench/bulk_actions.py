"""Probing many laptops at once, half of them unplugged: how long until every laptop's probe has ended, when a
selection's actions go one Celery task each to a pool of 4 worker processes (how single actions go, and how a
selection first went) against one task running them side by side in threads (how a selection goes now).

A scratch panel (data folder, Redis, migrations), a simulated LAN of `--laptops` laptops registered but never
probed, every second one unplugged (its link down, so SSH waits its full 10 s to give up), and one Celery worker
as `make run` starts it (prefork, 4 processes). Rounds alternate the two ways; each checks that every reachable
laptop's probe succeeded and every unplugged one's failed saying it could not be reached.

    sudo .venv/bin/python bench/bulk_actions.py [--laptops 39] [--rounds 2]
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
NAME, SUBNET = "bbulk", "10.251.0.0/24"


def start_worker(env: dict) -> subprocess.Popen:
    from clusterpanel.kit.celery import app

    worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", "clusterpanel", "worker", "--concurrency", "4",
                               "--loglevel", "WARNING", "--without-mingle", "--without-gossip"], cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(120):
        if app.control.ping(timeout=1):
            return worker
    raise SystemExit("the Celery worker did not answer within 2 minutes")


def one_task_each(nodes: list) -> list:
    from nodes.models import ActionKind, NodeAction
    from nodes.tasks import send

    actions = [NodeAction.objects.create(node=node, kind=ActionKind.PROBE) for node in nodes]
    for action in actions:
        send(action)
    return actions


def side_by_side(nodes: list) -> list:
    from nodes.models import ActionKind
    from nodes.tasks import enqueue_many

    return enqueue_many(nodes, ActionKind.PROBE)  # autocommit: sent at once


def until_ended(actions: list, started: float, unplugged: set[str]) -> tuple[float, str]:
    from nodes.actions import bulk
    from nodes.models import NodeAction

    ids = [action.pk for action in actions]
    while True:
        found = list(NodeAction.objects.select_related("node").filter(pk__in=ids))
        if all(action.status in NodeAction.TERMINAL for action in found):
            break
        time.sleep(0.1)
    elapsed = time.monotonic() - started
    for action in found:
        lost = action.laptop_name in unplugged
        right = (action.status == "failed" and "Cannot reach" in action.error and action.progress.get("unreachable")
                 ) if lost else action.status == "succeeded"
        if not right:
            raise SystemExit(f"{action.laptop_name}: {action.status} {action.error!r}")
    return elapsed, bulk.summary(found)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--laptops", type=int, default=39)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    data = Path(tempfile.mkdtemp(prefix="bench-bulk-"))
    os.chmod(data, 0o755)
    os.environ.update(DATA_DIR=str(data), DJANGO_SETTINGS_MODULE="clusterpanel.settings")
    sys.path.insert(0, str(ROOT))
    from clusterpanel.run.redis_server import RedisServer

    redis = RedisServer.start(data / "redis")
    os.environ["REDIS_URL"] = redis.url
    worker, harness = None, None
    try:
        import django

        django.setup()
        from django.core.management import call_command

        from nodes.models import Node
        from nodes.simlan.lan import SimLan

        call_command("migrate", verbosity=0)
        harness = SimLan(NAME, data / "simlan", subnet=SUBNET)
        lan = harness.up(args.laptops)
        key = Path(lan.key_path).read_text()
        nodes = [Node.objects.create(name=f"hid5-{i + 1}", host=laptop.address, username=laptop.user,
                                     host_key=laptop.host_key, private_key=key) for i, laptop in enumerate(lan.laptops)]
        unplugged = {node.name for i, node in enumerate(nodes) if i % 2}
        for i in range(1, len(nodes), 2):
            subprocess.run(["ip", "link", "set", harness.veth(i + 1), "down"], check=True)
        worker = start_worker({**os.environ})
        times: dict[str, list[float]] = {"one Celery task per laptop (4 processes)": [],
                                         "one task, laptops side by side in threads": []}
        said = ""
        for round_ in range(args.rounds):
            for way, start in zip(times, (one_task_each, side_by_side), strict=True):
                began = time.monotonic()
                elapsed, said = until_ended(start(nodes), began, unplugged)
                times[way].append(elapsed)
                print(f"round {round_ + 1}, {way}: {elapsed:.1f} s", flush=True)
        report(times, args.laptops, len(unplugged), said)
    finally:
        if worker:
            worker.terminate()
            worker.wait(60)
        if harness:
            harness.down()
        redis.stop()
        shutil.rmtree(data, ignore_errors=True)


def report(times: dict[str, list[float]], laptops: int, unplugged: int, said: str) -> None:
    base = statistics.median(next(iter(times.values())))
    print(f"\n{laptops} laptops, {unplugged} unplugged; probe of all, until every one has ended\n")
    print("| how the actions run | median s | range s | ratio |")
    print("|---|---|---|---|")
    for way, values in times.items():
        median = statistics.median(values)
        print(f"| {way} | {median:.1f} | {min(values):.1f}–{max(values):.1f} | {median / base:.2f} |")
    print(f"\nSummary of the last round: {said}")


if __name__ == "__main__":
    main()
