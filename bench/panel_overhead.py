"""What the panel costs a chat: tokens/s and time to first token seen by a WebSocket client, against the same
model on the same laptops driven in-process by llama-cpp-python.

The bundled model is deployed over three simulated laptops (1 Gbit links, SSH tunnels, even split) through
the panel; a second rpc-server on each laptop, tunnelled the same way, serves an in-process llama-cpp-python
with the same n_gpu_layers/tensor_split. Rounds alternate: the panel path (POST to the chat page, the job
through the queue and the engine, tokens through Redis and the web server to a real WebSocket client) and the
in-process path (create_chat_completion streaming in a process of its own), which goes first alternating.
Same prompt within a round, a new one each round, greedy. Ratios are taken round by round.

Two flags take the panel apart: --no-listener runs the panel path with nobody listening (its times are the
engine's own token stamps), --engine-code has the in-process path run the engine's own code
(jobs/engine/loaded_model.py) in a plain process.

    .venv/bin/python bench/panel_overhead.py [--rounds 40] [--tokens 128] [--pin] [--no-listener] [--engine-code]
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
from models_app.llamacpp import cpucheck, libllama
endpoints, model, ngl, split, ctx, expected, engine_code = json.loads(sys.argv[1])
GREEDY = {"temperature": 0.0, "top_p": 1.0, "top_k": 40, "repeat_penalty": 1.0}
times, cpu_at_first = [], []
def seen(text=None):
    times.append(time.time())
    if len(times) == 1:
        cpu_at_first.append(time.process_time())
if engine_code:
    import django; django.setup()
    from jobs.engine.loaded_model import Engine
    engine = Engine(model, endpoints, ngl, split, ctx, expected)
    engine.load(lambda p: None)
    def stream(ask):
        prompt, stops = engine.chat_prompt(ask["messages"])
        engine.run(prompt, {"max_tokens": ask["max_tokens"], **GREEDY}, seen, lambda: False, stops)
else:
    libllama.register_rpc_servers(endpoints)
    from llama_cpp import Llama
    with cpucheck.loading():
        llm = Llama(model_path=model, n_ctx=ctx, n_gpu_layers=ngl, tensor_split=[float(x) for x in split],
                    verbose=False)
    def stream(ask):
        for chunk in llm.create_chat_completion(ask["messages"], max_tokens=ask["max_tokens"], stream=True, **GREEDY):
            if chunk["choices"][0]["delta"].get("content"):
                seen()
print("ready", flush=True)
for line in sys.stdin:
    ask, started = json.loads(line), time.time()
    times.clear(), cpu_at_first.clear()
    stream(ask)
    print(json.dumps({"started": started, "times": times, "cpu": time.process_time() - cpu_at_first[0]}), flush=True)
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

    pids = {"web server": panel.pids["web"], "redis": panel.pids["redis"],
            "engine worker": Deployment.objects.get(pk=deployment.pk).engine.get("worker", 0)}
    return {name: cpu_seconds(pid) for name, pid in pids.items()}


def prompt(round_no: int) -> list[dict]:
    return [{"role": "user", "content": f"Tell me, in round {round_no}, about clusters of old laptops."}]


def through_panel(panel, session, deployment, round_no: int, tokens: int, listener: bool = True) -> dict:
    """A new conversation each round, so the model sees exactly the in-process prompt. Without a listener,
    the times are the engine's own (when each token was handed to the stream)."""
    from websockets.sync.client import connect

    from clusterpanel.accounts.models import User
    from jobs.models import Conversation

    conversation = Conversation.objects.create(user=User.objects.get(username="bench")).pk

    page = session.get(f"{panel.base}/chat/{conversation}/", timeout=10)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    started = time.time()
    job = session.post(f"{panel.base}/chat/{conversation}/send/", timeout=10, json={
        "text": prompt(round_no)[0]["content"], "deployment": deployment.pk,
        "params": {"temperature": 0, "top_p": 1, "top_k": 40, "repeat_penalty": 1, "max_tokens": tokens}},
        headers={"X-CSRFToken": token, "Referer": page.url}).json()["job"]
    from jobs.models import Job
    from jobs.queue import stream

    times, cpu = [], []
    if not listener:
        while not Job.objects.get(pk=job).is_finished:
            time.sleep(0.05)
        stamps = [event["t"] for event in stream.kept(job) if event.get("event") == "token"]
        return {"started": started, "times": stamps, "engine_rate": None, "cpu": {}}
    with connect(f"ws://127.0.0.1:{panel.port}/ws/jobs/{job}/", additional_headers={"Cookie": panel.cookie},
                 origin=panel.base) as socket:
        while True:
            event = json.loads(socket.recv(timeout=120))
            if event.get("event") == "token":
                times.append(time.time())
                if len(times) == 1:
                    cpu.append(panel_cpu(panel, deployment))
            elif event.get("event") == "done":
                cpu.append(panel_cpu(panel, deployment))
                break
    engine_rate = Job.objects.get(pk=job).timings()["tokens_per_s"]
    return {"started": started, "times": times, "engine_rate": engine_rate,
            "cpu": {name: cpu[1][name] - cpu[0][name] for name in cpu[0]}}


def in_process_worker(panel, deployment, engine_code: bool):
    from models_app.deploying.deploy import expected_devices
    from nodes.remote import ssh
    from nodes.servers import rpcserver

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
        [endpoints, deployment.model.path, plan["n_gpu_layers"], plan["tensor_split"], deployment.ctx,
         expected_devices(plan), engine_code])],
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
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--pin", action="store_true",
                        help="head and panel on CPU 0, the laptops on CPU 1: separate machines, as in a real lab")
    parser.add_argument("--no-listener", action="store_true",
                        help="no WebSocket client: the panel path's times are the engine's own token stamps")
    parser.add_argument("--engine-code", action="store_true",
                        help="the in-process path runs the engine's own code (jobs/engine/loaded_model.py) in a plain "
                             "process")
    args = parser.parse_args()
    if args.pin:
        os.sched_setaffinity(0, {0})  # inherited by every panel process this script starts
    with scratch_panel() as panel:
        if args.pin:
            for laptop in panel.lan.laptops:
                os.sched_setaffinity(laptop.sshd_pid, {1})  # and by everything started on the laptop
        import requests

        from models_app.library.adding import ensure_bundled
        from nodes.servers import rpcserver

        deployment = panel.deploy(ensure_bundled())
        session = requests.Session()
        session.cookies.set("sessionid", panel.cookie.split("=", 1)[1], domain="127.0.0.1")
        worker, forwards = in_process_worker(panel, deployment, args.engine_code)
        panel_rows, in_process_rows, cpu = [], [], {}
        try:
            for round_no in range(args.rounds):
                # Which path goes first alternates, so neither always finds the machine as the other left it.
                for path in (("panel", "in-process") if round_no % 2 == 0 else ("in-process", "panel")):
                    if path == "panel":
                        run = through_panel(panel, session, deployment, round_no, args.tokens, not args.no_listener)
                        panel_rows.append(summary(run))
                        for name, seconds in run["cpu"].items():
                            cpu.setdefault(name, []).append((seconds, len(run["times"]) - 1))
                    else:
                        run = in_process(worker, round_no, args.tokens)
                        in_process_rows.append(summary(run))
                        cpu.setdefault("in-process llama-cpp-python", []).append((run["cpu"], len(run["times"]) - 1))
        finally:
            worker.stdin.close()
            worker.wait(30)
            for node, forward in forwards:
                forward.close()
                rpcserver.stop(node.ssh_target(), node.install_dir, EXTRA_PORT)
    report(args, panel_rows, in_process_rows, cpu)


def report(args, panel_rows: list, in_process_rows: list, cpu: dict) -> None:
    """Ratios and TTFT differences are taken round by round (same prompt, moments apart), then the median:
    the machine's drift over a run cancels out of each pair."""
    ratios = sorted(p[1] / b[1] for p, b in zip(panel_rows, in_process_rows, strict=True))
    overheads = [p[0] - b[0] for p, b in zip(panel_rows, in_process_rows, strict=True)]
    quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    where = ("head and panel pinned to CPU 0, laptops to CPU 1" if args.pin
             else "head, panel and laptops sharing both CPUs")
    if args.no_listener:
        where += "; no listener (the panel path's times are the engine's)"
    if args.engine_code:
        where += "; the in-process path runs jobs/engine/loaded_model.py"
    print(f"\nBundled model over 3 simulated laptops (1 Gbit, SSH tunnels, even split), {args.rounds} rounds of "
          f"{args.tokens} greedy tokens on each path (order alternating), a new prompt each round; {where}\n")
    print("| path | TTFT ms (median) | tokens/s seen (median) | tokens/s in the engine (median) |")
    print("|---|---:|---:|---:|")
    for name, rows in (("panel (WebSocket client)", panel_rows), ("in-process llama-cpp-python", in_process_rows)):
        engine = [e for _, _, e in rows if e] or [r for _, r, _ in rows]
        print(f"| {name} | {statistics.median(t for t, _, _ in rows):.1f} | "
              f"{statistics.median(r for _, r, _ in rows):.1f} | {statistics.median(engine):.1f} |")
    print(f"\nPanel vs in-process, round by round: tokens/s ratio median **{statistics.median(ratios):.3f}** "
          f"(quartiles {quartiles[0]:.3f}–{quartiles[2]:.3f}, target ≥ 0.97); TTFT overhead median "
          f"**{statistics.median(overheads):+.1f} ms** (target ≤ 30).\n")
    print("CPU spent per generated token while tokens streamed (first token to last; the engine worker's and the "
          "in-process run's include llama.cpp's head-side work):\n")
    print("| process | ms CPU per token |")
    print("|---|---:|")
    for name, rows in cpu.items():
        print(f"| {name} | {1000 * sum(s for s, _ in rows) / sum(n for _, n in rows):.2f} |")


if __name__ == "__main__":
    main()
