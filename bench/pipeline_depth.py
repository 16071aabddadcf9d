"""What a token costs as the pipeline grows: one model split over 1, 3, 8, 16 and 39 rpc-servers.

The servers are the laptops' own binary (the runtime bundle, built with scripts/llama_patches/) on loopback,
one thread each, so the compute per token is the same at every depth and what changes is the hops. The model
is a qwen2 of 80 small layers (random f16 weights, SmolLM2's tokenizer), as many as the seeds' 70B models
have, split evenly. For each depth, in rounds that alternate the depths: time to first token of a 40-token
prompt, decode tokens/s over `--tokens` tokens, and the decode time per token. The per-hop cost is the slope
of the time per token against the number of servers; the increments between depths show whether it stays
linear.

    .venv/bin/python bench/pipeline_depth.py [--depths 1,3,8,16,39] [--rounds 3] [--tokens 48]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from scripts.llama_source import extract_all  # noqa: E402

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clusterpanel.settings")
LAYERS = 80
PROMPT = " ".join(["The laptops on the shelf share one model."] * 4)

CHILD = """
import json, sys, time
from models_app.llamacpp import cpucheck, libllama
endpoints, split, model, tokens, prompt = json.loads(sys.argv[1])
if endpoints:
    libllama.register_rpc_servers(endpoints)
from llama_cpp import Llama
with cpucheck.loading():
    llm = Llama(model_path=model, n_ctx=512, seed=1, verbose=False, n_gpu_layers=999 if endpoints else 0,
                tensor_split=[float(x) for x in split] or None)
llm(prompt, max_tokens=2, temperature=0.0)  # warm: buffers allocated, graphs built
llm.reset()
start = time.perf_counter()
first = None
count = 0
for chunk in llm(prompt, max_tokens=tokens, temperature=0.0, stop=[], stream=True):
    now = time.perf_counter()
    first = first or now
    count += 1
end = time.perf_counter()
print(json.dumps({"ttft": first - start, "decode": (count - 1) / (end - first), "tokens": count}))
"""


def start_servers(binary: Path, count: int, logs: Path) -> list[tuple[subprocess.Popen, int]]:
    from tests.conftest import free_port, wait_for_port

    servers = []
    for i in range(count):
        port = free_port()
        process = subprocess.Popen([str(binary), "-H", "127.0.0.1", "-p", str(port), "-t", "1"],
                                   stdout=open(logs / f"rpc-{count}-{i}.log", "w"), stderr=subprocess.STDOUT)
        servers.append((process, port))
        wait_for_port(port, process=process)
    return servers


def even_split(layers: int, devices: int) -> list[int]:
    return [layers // devices + (i < layers % devices) for i in range(devices)]


def one_run(binary: Path, depth: int, model: Path, tokens: int, logs: Path) -> dict:
    servers = start_servers(binary, depth, logs)
    try:
        args = json.dumps([[f"127.0.0.1:{port}" for _, port in servers], even_split(LAYERS, depth), str(model),
                           tokens, PROMPT])
        started = time.perf_counter()
        result = subprocess.run([sys.executable, "-c", CHILD, args], capture_output=True, text=True, cwd=ROOT,
                                timeout=900)
        if result.returncode != 0:
            raise SystemExit(f"{depth} servers: the run failed:\n{result.stderr[-3000:]}")
        answer = json.loads(result.stdout.strip().splitlines()[-1])
        answer["load_and_run"] = time.perf_counter() - started
        return answer
    finally:
        for process, _ in servers:
            process.terminate()
            process.wait()


def slope(xs: list[float], ys: list[float]) -> float:
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--depths", default="1,3,8,16,39")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=48)
    args = parser.parse_args()
    depths = [int(d) for d in args.depths.split(",")]

    import django

    django.setup()
    from nodes.runtime.bundle import find_bundle
    from tests.models_app.gguf_files import write_loadable_model

    work = Path(tempfile.mkdtemp(prefix="bench-depth-"))
    try:
        with tarfile.open(find_bundle().tarball) as archive:
            extract_all(archive, work)
        binary = next(work.glob("*/bin/ggml-rpc-server"))
        model = write_loadable_model(work / "deep.gguf", layers=LAYERS, embd=256, ffn=512)
        size = model.stat().st_size
        runs: dict[int, list[dict]] = {d: [] for d in depths}
        for _ in range(args.rounds):
            for depth in depths:
                runs[depth].append(one_run(binary, depth, model, args.tokens, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    per_token = {d: statistics.median(1000 / r["decode"] for r in runs[d]) for d in depths}
    base = per_token[depths[0]]
    print(f"qwen2 test model, {LAYERS} layers (embd 256, f16, {size / 2**20:.0f} MiB), split "
          f"evenly over N rpc-servers on loopback, 1 thread each; prompt 40 tokens, {args.tokens} generated; "
          f"median of {args.rounds} alternating rounds\n")
    print("| servers | time to first token (ms) | decode tok/s | ms per token | × 1 server | "
          "ms per token added per server since the previous depth |")
    print("|---|---|---|---|---|---|")
    previous = None
    for depth in depths:
        ttft = statistics.median(r["ttft"] * 1000 for r in runs[depth])
        decode = statistics.median(r["decode"] for r in runs[depth])
        step = "" if previous is None else f"{(per_token[depth] - per_token[previous]) / (depth - previous):.3f}"
        print(f"| {depth} | {ttft:.0f} | {decode:.1f} | {per_token[depth]:.2f} | {per_token[depth] / base:.2f} | "
              f"{step} |")
        previous = depth
    hop = slope([float(d) for d in depths], [per_token[d] for d in depths])
    print(f"\nleast-squares per-hop cost: {hop:.3f} ms per token per server added")


if __name__ == "__main__":
    main()
