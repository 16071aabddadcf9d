"""How long planning takes as the lab grows: `POST /api/plans/`, the plan page and `manage.py plan` over 3, 8,
16, 39 and 64 laptops, asked for each mode, this tree against an older one (`--before`), on one scratch
database: 64 probed laptops of 2 GiB (one in three measured slower, each with a link check) and an 80-layer
model of about 1 GiB, the issue's lab. Every answer is checked to be a plan over the laptops asked for.

    .venv/bin/python bench/planning_speed.py [--before 47df424] [--rounds 3] [--old-rounds 1] [--old-up-to 39]

Each side runs in its own process from its own tree (a git worktree for the older one), sides alternating;
the older tree had no `manage.py plan`. Figures are medians in seconds; the slots are left to the planner (the
most of 8, 4, 2, 1 that fit), as the page and the API do unless told.
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
MODES = ("fastest", "memory", "even")
SURFACES = ("api", "page", "command")
MiB = 2**20
MODEL = "test-80"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", default="47df424", help="git revision of the older planner")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--old-rounds", type=int, default=1, help="rounds of the older tree (it is slow)")
    parser.add_argument("--old-up-to", type=int, default=39, help="the most laptops the older tree is asked for")
    parser.add_argument("--sizes", default="3,8,16,39,64")
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # a child: measure these sizes, print JSON
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    if args.measure:
        print(json.dumps(measure(sizes)))
        return
    data = Path(tempfile.mkdtemp(prefix="bench-planning-"))
    before = data / "before-tree"
    subprocess.run(["git", "worktree", "add", "-q", "--detach", str(before), args.before], cwd=ROOT, check=True)
    env = {**os.environ, "DATA_DIR": str(data), "DJANGO_SETTINGS_MODULE": "clusterpanel.settings",
           "ALLOWED_HOSTS": "testserver,localhost"}
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    from clusterpanel.run.redis_server import RedisServer

    redis = RedisServer.start(data / "redis")
    env["REDIS_URL"] = os.environ["REDIS_URL"] = redis.url
    try:
        lab()
        results: dict = {"before": [], "after": []}
        for round_number in range(max(args.rounds, args.old_rounds)):
            for side, tree in (("before", before), ("after", ROOT)):
                if round_number >= (args.old_rounds if side == "before" else args.rounds):
                    continue
                asked = [s for s in sizes if side == "after" or s <= args.old_up_to]
                results[side].append(child(tree, asked, env))
        report(results, sizes, args)
    finally:
        redis.stop()
        subprocess.run(["git", "worktree", "remove", "--force", str(before)], cwd=ROOT)
        shutil.rmtree(data, ignore_errors=True)


def child(tree: Path, sizes: list[int], env: dict) -> dict:
    """One side's figures, measured in a process of its own tree, with its own collected static files."""
    env = {**env, "PYTHONPATH": str(tree), "STATIC_ROOT": str(Path(env["DATA_DIR"]) / f"static-{tree.name}")}
    if not Path(env["STATIC_ROOT"]).exists():
        subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], cwd=tree, env=env,
                       check=True)
    script = [sys.executable, str(Path(__file__).resolve()), "--measure", "x", "--sizes", ",".join(map(str, sizes))]
    done = subprocess.run(script, cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"measuring in {tree} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def lab() -> None:
    """64 laptops hid5-1 … hid5-64 and the model, in the scratch database both trees read."""
    import django

    django.setup()
    from django.core.management import call_command

    from clusterpanel.accounts.models import Role, User
    from models_app.models import GgufModel
    from nodes.models import LinkCheck, Node, NodeStatus, Probe

    call_command("migrate", verbosity=0)
    User.objects.create_user("bench", password="bench-password-1", role=Role.ADMIN)
    for number in range(1, 65):
        node = Node.objects.create(name=f"hid5-{number}", host=f"10.9.{number}.1", username="lab",
                                   host_key="ssh-ed25519 AAAA", status=NodeStatus.READY,
                                   speed_gb_s=4.0 if number % 3 == 0 else 8.0)
        Probe.objects.create(node=node, facts={"ram_available": 3 << 30, "ram_limit": 2 << 30})
        LinkCheck.objects.create(node=node, report={"rtt_median_ms": 0.3 + number % 5 / 10})
    GgufModel.objects.create(
        name=MODEL, path="/nonexistent/test-80.gguf", size=80 * 12 * MiB, status="ready", architecture="llama",
        n_layer=80, n_embd=1024, n_head=16, n_head_kv=4, n_ff=4096, context_length=8192, vocab_size=32000,
        file_type="Q4_0", layer_bytes=[12 * MiB] * 80,
        other_tensors={"token_embd.weight": 20 * MiB, "output.weight": 20 * MiB})


def measure(sizes: list[int]) -> dict:
    """In a child, from its own tree: seconds per (size, mode, surface); None where the tree has no such door."""
    import django

    django.setup()
    from django.test import Client

    from clusterpanel.accounts.models import ApiToken, User
    from nodes.models import Node

    user = User.objects.get(username="bench")
    api = Client(HTTP_AUTHORIZATION=f"Bearer {ApiToken.issue(user, 'bench')[1]}")
    page = Client()
    page.force_login(user)
    laptops = sorted(Node.objects.all(), key=lambda node: int(node.name.split("-")[1]))
    for run in (by_api, by_page, by_command):  # first calls import and compile what later ones reuse: not timed
        run((api, page), laptops[:2], "even")
    timings = {}
    for size in sizes:
        for mode in MODES:
            for surface, run in (("api", by_api), ("page", by_page), ("command", by_command)):
                started = time.perf_counter()
                said = run((api, page), laptops[:size], mode)
                timings[f"{size} {mode} {surface}"] = said and time.perf_counter() - started
                if surface == "api":
                    timings[f"{size} {mode} tokens/s"] = said
    return timings


def by_api(clients, laptops, mode) -> float:
    """The mode's predicted tokens/s, to hold the two trees' answers side by side."""
    names = [node.name for node in laptops]
    answer = clients[0].post("/api/plans/", {"model": MODEL, "nodes": names, "mode": mode}, "application/json")
    assert answer.status_code == 200 and sorted(answer.json()["nodes"]) == sorted(names), answer.content[:300]
    assert "error" not in answer.json()["modes"][mode], answer.json()["modes"][mode]
    return answer.json()["modes"][mode]["tokens_per_second"]


def by_page(clients, laptops, mode) -> bool:
    from models_app.models import GgufModel

    model = GgufModel.objects.get(name=MODEL)
    answer = clients[1].get("/models/plan/", {"model": model.pk, "nodes": [node.pk for node in laptops],
                                              "ctx": 2048, "mode": mode})
    assert answer.status_code == 200 and b"n_gpu_layers=" in answer.content
    return True


def by_command(clients, laptops, mode) -> bool:
    """False where the tree has no `manage.py plan`."""
    from io import StringIO

    from django.core.management import call_command, get_commands

    if "plan" not in get_commands():
        return False
    out = StringIO()
    call_command("plan", MODEL, "--nodes", ",".join(node.name for node in laptops), "--mode", mode, stdout=out)
    assert "tensor_split=" in out.getvalue()
    return True


def report(results: dict, sizes: list[int], args) -> None:
    def median(side: str, key: str) -> float | None:
        values = [run[key] for run in results[side] if run.get(key) is not None]
        return statistics.median(values) if values else None

    def shown(value: float | None) -> str:
        return "—" if value is None else f"{value:.2f} s"

    print(f"after: {args.rounds} rounds; before ({args.before}): {args.old_rounds} round(s), up to "
          f"{args.old_up_to} laptops; medians\n")
    print("| laptops | mode | API before | API after | ratio | page before | page after | ratio | "
          "`manage.py plan` after | predicted tok/s before | after |")
    print("|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for size in sizes:
        for mode in MODES:
            cells = []
            for surface in ("api", "page"):
                old, new = median("before", f"{size} {mode} {surface}"), median("after", f"{size} {mode} {surface}")
                ratio = f"{new / old:.3f}" if old and new else "—"
                cells += [shown(old), shown(new), ratio]
            command = shown(median("after", f"{size} {mode} command"))
            speeds = [median(side, f"{size} {mode} tokens/s") for side in ("before", "after")]
            said = " | ".join("—" if speed is None else f"{speed:.2f}" for speed in speeds)
            print(f"| {size} | {mode} | {' | '.join(cells)} | {command} | {said} |")


if __name__ == "__main__":
    main()
