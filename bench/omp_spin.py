"""How long an rpc-server's OpenMP threads should spin for work before they sleep (settings.RPC_SPIN_COUNT).

ggml's CPU backend runs each computation as an OpenMP parallel region and waits at a barrier after every
operation; between regions, and at a barrier, libgomp's threads spin GOMP_SPINCOUNT rounds (300 000 by
default: milliseconds) before they sleep. A laptop in a pipeline computes its layers and then waits for the
others, so it spins most of that wait; sleeping at once (OMP_WAIT_POLICY=passive) costs a wake-up at every
barrier instead.

Two setups on simulated laptops (1 Gbit links, direct LAN mode), both models, servers started by
nodes/servers/rpcserver.py with each spin count, rounds alternating the order of the counts:
  one laptop holding every layer: a laptop computing on its own (its two threads have both cores)
  three laptops, even split: the pipeline, all laptops sharing this machine's two cores

    .venv/bin/python bench/omp_spin.py [--rounds 6] [--tokens 64] [--counts 0,10000,30000,100000]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from itertools import product
from pathlib import Path

from distribution_cost import two_models
from heterogeneous import INSTALL_DIR
from lan import ROOT, bench_lan, with_runtime

BASE_PORT = 50420
PROMPT = "<|im_start|>user\nTell me about clusters of laptops, round {}.<|im_end|>\n<|im_start|>assistant\n"
WORKER = r"""
import json, sys, time
from models_app.llamacpp import cpucheck, libllama
endpoints, model, ngl, split = json.loads(sys.argv[1])
libllama.register_rpc_servers(endpoints)
from llama_cpp import Llama
with cpucheck.loading():
    llm = Llama(model_path=model, n_ctx=512, n_gpu_layers=ngl, tensor_split=[float(x) for x in split], verbose=False)
print("ready", flush=True)
for line in sys.stdin:
    ask = json.loads(line)
    stamps = []
    for chunk in llm.create_completion(ask["prompt"], max_tokens=ask["tokens"], temperature=0, stream=True):
        stamps.append(time.time())
    print(json.dumps((len(stamps) - 1) / (stamps[-1] - stamps[0])), flush=True)
"""


def cpu_ticks(pid: int) -> int:
    """CPU time of every thread of a server (the laptops' processes are visible from here)."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def label(count: int) -> str:
    return "libgomp default (300 000)" if count == 0 else f"{count:,}".replace(",", " ")


def load(nodes, ports, setups, counts, path: Path) -> dict:
    from models_app.gguf.meta import read_metadata
    from models_app.planning.planner import proportional_counts

    layers = read_metadata(path).n_layer + 1
    workers = {}
    for setup, used in setups.items():
        for count in counts:
            endpoints = [f"{nodes[i].host}:{ports[(setup, count)]}" for i in used]
            split = proportional_counts(layers, [1.0] * len(used))
            worker = subprocess.Popen(
                [sys.executable, "-c", WORKER, json.dumps([endpoints, str(path), layers, split])],
                cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            workers[(setup, count)] = worker
            if worker.stdout.readline().strip() != "ready":
                raise SystemExit(f"{path.name} did not load on {endpoints}")
    return workers


def generate(worker, round_no: int, tokens: int) -> float:
    worker.stdin.write(json.dumps({"prompt": PROMPT.format(round_no), "tokens": tokens}) + "\n")
    worker.stdin.flush()
    return float(worker.stdout.readline())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--counts", default="0,10000,30000,100000", help="GOMP_SPINCOUNT values; 0: libgomp's own")
    args = parser.parse_args()
    counts = [int(c) for c in args.counts.split(",")]
    with bench_lan(3, rate="1gbit", name="bspin", subnet="10.244.0.0/24") as lan, \
            tempfile.TemporaryDirectory(prefix="spin-") as scratch:
        from nodes.servers import rpcserver

        models = two_models(Path(scratch))
        nodes = with_runtime(lan, INSTALL_DIR)
        for laptop in lan.laptops:  # as measured (docs/benchmarks.md): each laptop sees both cores
            os.sched_setaffinity(laptop.sshd_pid, os.sched_getaffinity(0))
        pids: dict[tuple[str, int, int], int] = {}  # (setup, laptop, count) → server
        setups = {"1 laptop, every layer": [0], "3 laptops, even split": [0, 1, 2]}
        ports = {(setup, count): BASE_PORT + k for k, (setup, count) in
                 enumerate((setup, count) for setup in setups for count in counts)}  # a server takes one client
        rates, ticks = {}, {}
        try:
            for (setup, count), port in ports.items():
                for i in setups[setup]:
                    pids[(setup, i, count)] = rpcserver.start(nodes[i], INSTALL_DIR, port, bind=nodes[i].host,
                                                              spin_count=count).pid
            for name, path in models.items():  # one model at a time: a server takes one client
                workers = load(nodes, ports, setups, counts, path)
                try:
                    for round_no in range(args.rounds):
                        for setup, count in product(setups, counts if round_no % 2 == 0 else counts[::-1]):
                            used = setups[setup]
                            before = sum(cpu_ticks(pids[(setup, i, count)]) for i in used)
                            rate = generate(workers[(setup, count)], round_no, args.tokens)
                            after = sum(cpu_ticks(pids[(setup, i, count)]) for i in used)
                            rates.setdefault((name, setup, count), []).append(rate)
                            ticks[(name, setup, count)] = ticks.get((name, setup, count), 0) + after - before
                finally:
                    for worker in workers.values():
                        worker.stdin.close()
                        worker.wait(30)
        finally:
            for (setup, _), port in ports.items():
                for i in setups[setup]:
                    rpcserver.stop(nodes[i], INSTALL_DIR, port)
    report(args, counts, models, setups, rates, ticks)


def report(args, counts, models, setups, rates, ticks) -> None:
    per_token = 1000 / os.sysconf("SC_CLK_TCK") / (args.rounds * (args.tokens - 1))
    print(f"\n{args.rounds} rounds of {args.tokens} greedy tokens per spin count (order alternating); "
          "simulated laptops on 1 Gbit links, direct LAN mode, two threads per server\n")
    print("| model | laptops | GOMP_SPINCOUNT | decode tok/s (median) | vs libgomp default (paired median) "
          "| laptops' CPU ms per token |")
    print("|---|---|---|---:|---:|---:|")
    base_count = counts[0]
    for name in models:
        for setup in setups:
            base = rates[(name, setup, base_count)]
            for count in counts:
                own = rates[(name, setup, count)]
                ratio = statistics.median(a / b for a, b in zip(own, base, strict=True))
                print(f"| {name} | {setup} | {label(count)} | {statistics.median(own):.1f} | {ratio:.2f} | "
                      f"{ticks[(name, setup, count)] * per_token:.1f} |")


if __name__ == "__main__":
    main()
