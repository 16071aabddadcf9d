"""What the panel costs a chat: tokens/s and time to first token seen by a WebSocket client, against the same
model on the same laptops driven in-process by llama-cpp-python.

The bundled model is deployed over three simulated laptops (1 Gbit links, SSH tunnels, even split) through
the panel; a second rpc-server on each laptop, tunnelled the same way, serves an in-process llama-cpp-python
with the same n_gpu_layers/tensor_split. Rounds alternate: the panel path (POST to the chat page, the job
through the queue and the engine, tokens through Redis and daphne to a real WebSocket client) and the
in-process path (create_chat_completion streaming in a process of its own). Same prompt within a round,
a new one each round, greedy.

    .venv/bin/python bench/panel_overhead.py [--rounds 8] [--tokens 64]
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

from scratch_panel import ROOT, free_port, scratch_panel

EXTRA_PORT = 50310
IN_PROCESS = r"""
import json, sys, time
from jobs import llamacpp
endpoints, model, ngl, split, ctx = json.loads(sys.argv[1])
llamacpp.register_rpc_servers(endpoints)
from llama_cpp import Llama
llm = Llama(model_path=model, n_ctx=ctx, n_gpu_layers=ngl, tensor_split=[float(x) for x in split], verbose=False)
print("ready", flush=True)
for line in sys.stdin:
    ask = json.loads(line)
    started, times = time.time(), []
    for chunk in llm.create_chat_completion(ask["messages"], max_tokens=ask["max_tokens"], temperature=0.0,
                                            top_p=1.0, top_k=40, repeat_penalty=1.0, stream=True):
        if chunk["choices"][0]["delta"].get("content"):
            times.append(time.time())
    print(json.dumps({"started": started, "times": times}), flush=True)
"""


def cpu_seconds(pid: int) -> float:
    """CPU time of a process and everything it started."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        children = [int(p) for t in os.listdir(f"/proc/{pid}/task")
                    for p in open(f"/proc/{pid}/task/{t}/children").read().split()]
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") + sum(cpu_seconds(c) for c in children)


def panel_cpu(panel, deployment) -> dict[str, float]:
    from models_app.models import Deployment

    pids = {"web (daphne)": panel.pids["web"], "redis": panel.pids["redis"],
            "engine worker": Deployment.objects.get(pk=deployment.pk).engine.get("worker", 0)}
    return {name: cpu_seconds(pid) for name, pid in pids.items()}


def prompt(round_no: int) -> list[dict]:
    return [{"role": "user", "content": f"Tell me, in round {round_no}, about clusters of old laptops."}]


def through_panel(panel, session, deployment: int, round_no: int, tokens: int) -> dict:
    """A new conversation each round, so the model sees exactly the in-process prompt."""
    from websockets.sync.client import connect

    from clusterpanel.models import User
    from jobs.models import Conversation

    conversation = Conversation.objects.create(user=User.objects.get(username="bench")).pk

    page = session.get(f"{panel.base}/chat/{conversation}/", timeout=10)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    started = time.time()
    job = session.post(f"{panel.base}/chat/{conversation}/send/", timeout=10, json={
        "text": prompt(round_no)[0]["content"], "deployment": deployment,
        "params": {"temperature": 0, "top_p": 1, "top_k": 40, "repeat_penalty": 1, "max_tokens": tokens}},
        headers={"X-CSRFToken": token, "Referer": page.url}).json()["job"]
    times = []
    with connect(f"ws://127.0.0.1:{panel.port}/ws/jobs/{job}/", additional_headers={"Cookie": panel.cookie},
                 origin=panel.base) as socket:
        while True:
            event = json.loads(socket.recv(timeout=120))
            if event.get("event") == "token":
                times.append(time.time())
            elif event.get("event") == "done":
                break
    from jobs.models import Job

    engine_rate = Job.objects.get(pk=job).timings()["tokens_per_s"]
    return {"started": started, "times": times, "engine_rate": engine_rate}


def in_process_worker(panel, deployment):
    from nodes import rpcserver, ssh

    endpoints, forwards = [], []
    for stage in deployment.stages.select_related("node"):
        target = stage.node.ssh_target()
        rpcserver.start(target, stage.node.install_dir, EXTRA_PORT, bind="127.0.0.1")
        forward = ssh.forward(target, EXTRA_PORT, free_port())
        forwards.append((stage.node, forward))
        endpoints.append(f"127.0.0.1:{forward.local_port}")
    time.sleep(1)
    plan = deployment.plan
    worker = subprocess.Popen([sys.executable, "-c", IN_PROCESS, json.dumps(
        [endpoints, deployment.model.path, plan["n_gpu_layers"], plan["tensor_split"], deployment.ctx])],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if worker.stdout.readline().strip() != "ready":
        raise SystemExit("the in-process llama-cpp-python did not load")
    return worker, forwards


def in_process(worker, round_no: int, tokens: int) -> dict:
    worker.stdin.write(json.dumps({"messages": prompt(round_no), "max_tokens": tokens}) + "\n")
    worker.stdin.flush()
    return json.loads(worker.stdout.readline())


def summary(run: dict) -> tuple[float, float, float | None]:
    times = run["times"]
    return (times[0] - run["started"]) * 1000, (len(times) - 1) / (times[-1] - times[0]), run.get("engine_rate")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--pin", action="store_true",
                        help="head and panel on CPU 0, the laptops on CPU 1: separate machines, as in a real lab")
    args = parser.parse_args()
    if args.pin:
        os.sched_setaffinity(0, {0})  # inherited by every panel process this script starts
    with scratch_panel() as panel:
        if args.pin:
            for laptop in panel.lan.laptops:
                os.sched_setaffinity(laptop.sshd_pid, {1})  # and by everything started on the laptop
        import requests

        from models_app.library import ensure_bundled
        from nodes import rpcserver

        deployment = panel.deploy(ensure_bundled())
        session = requests.Session()
        session.cookies.set("sessionid", panel.cookie.split("=", 1)[1], domain="127.0.0.1")
        worker, forwards = in_process_worker(panel, deployment)
        results = {"panel (WebSocket client)": [], "in-process llama-cpp-python": []}
        try:
            cpu, tokens_seen = {}, 0
            for round_no in range(args.rounds):
                before = panel_cpu(panel, deployment)
                run = through_panel(panel, session, deployment.pk, round_no, args.tokens)
                after = panel_cpu(panel, deployment)
                for name in before:
                    cpu[name] = cpu.get(name, 0.0) + after[name] - before[name]
                tokens_seen += len(run["times"])
                results["panel (WebSocket client)"].append(summary(run))
                results["in-process llama-cpp-python"].append(summary(in_process(worker, round_no, args.tokens)))
        finally:
            worker.stdin.close()
            worker.wait(30)
            for node, forward in forwards:
                forward.close()
                rpcserver.stop(node.ssh_target(), node.install_dir, EXTRA_PORT)
    base_ttft = statistics.median(t for t, _, _ in results["in-process llama-cpp-python"])
    base_rate = statistics.median(r for _, r, _ in results["in-process llama-cpp-python"])
    where = ("head and panel pinned to CPU 0, laptops to CPU 1" if args.pin
             else "head, panel and laptops sharing both CPUs")
    print(f"\nBundled model over 3 simulated laptops (1 Gbit, SSH tunnels, even split), {args.rounds} alternating "
          f"rounds of {args.tokens} greedy tokens, a new prompt each round; {where}\n")
    print("| path | time to first token ms (median) | TTFT overhead ms | tokens/s seen (median) | ratio "
          "| tokens/s in the engine |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, rows in results.items():
        ttft, rate = statistics.median(t for t, _, _ in rows), statistics.median(r for _, r, _ in rows)
        engine = [e for _, _, e in rows if e]
        print(f"| {name} | {ttft:.1f} | {ttft - base_ttft:+.1f} | {rate:.1f} | {rate / base_rate:.3f} | "
              f"{statistics.median(engine) if engine else rate:.1f} |")
    print("\nCPU the panel's own processes spent per generated token during its rounds (the engine worker's "
          "includes llama.cpp's head-side work):\n")
    print("| process | ms CPU per token |")
    print("|---|---:|")
    for name, seconds in cpu.items():
        print(f"| {name} | {1000 * seconds / tokens_seen:.2f} |")


if __name__ == "__main__":
    main()
