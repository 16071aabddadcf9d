"""Why the runtime bundle ships one CPU backend per instruction-set level.

Runs the bundled model with every layer on a local ggml-rpc-server from the
runtime bundle, twice over: once with the bundle as shipped (the server picks
the best CPU variant this machine supports) and once with only the baseline
x86-64 variant left in (what a portable single-variant build would give).
Rounds alternate between the two so machine noise hits both alike.

    .venv/bin/python bench/cpu_variants.py [--rounds 5] [--tokens 64]
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.harness import free_port  # noqa: E402
from scripts.llama_source import extract_all  # noqa: E402

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clusterpanel.settings")

LINES = " ".join(f"Line {i}: the quick brown fox jumps over the lazy dog." for i in range(30))
LONG_PROMPT = f"<|im_start|>user\n{LINES}<|im_end|>\n"
PROMPT = "<|im_start|>user\nWrite a short story about a laptop.<|im_end|>\n<|im_start|>assistant\n"


def start_server(bin_dir: Path, threads: int) -> tuple[subprocess.Popen, int, str]:
    port = free_port()
    log = bin_dir / f"rpc-{port}.log"
    process = subprocess.Popen([str(bin_dir / "ggml-rpc-server"), "-H", "127.0.0.1", "-p", str(port),
                                "-t", str(threads)], stdout=open(log, "w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.1)
    variant = next((line.split("from ")[-1].split("/")[-1].strip()
                    for line in log.read_text().splitlines() if "loaded CPU backend" in line), "?")
    return process, port, variant


def generate_once(endpoint: str, tokens: int) -> dict:
    """Prompt processing and decode speed, in a child process (llama.cpp aborts on RPC trouble)."""
    code = f"""
import json, time
from models_app.llamacpp import cpucheck, libllama
from models_app.library.bundled import bundled_model_path
libllama.register_rpc_servers([{endpoint!r}])
from llama_cpp import Llama
with cpucheck.loading():
    llm = Llama(model_path=str(bundled_model_path()), n_ctx=1024, n_batch=512, n_gpu_layers=99, verbose=False, seed=1)
llm({PROMPT!r}, max_tokens=4, temperature=0.0)
long_prompt = {LONG_PROMPT!r}
llm.reset()
start = time.perf_counter()
out = llm(long_prompt, max_tokens=1, temperature=0.0)
prompt_tokens = out["usage"]["prompt_tokens"]
prefill = prompt_tokens / (time.perf_counter() - start)
llm.reset()
llm({PROMPT!r}, max_tokens=1, temperature=0.0)
start = time.perf_counter()
out = llm({PROMPT!r}, max_tokens={tokens}, temperature=0.0, stop=[])
decode = out["usage"]["completion_tokens"] / (time.perf_counter() - start)
print(json.dumps({{"prefill": prefill, "decode": decode, "prompt_tokens": prompt_tokens}}))
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=600)
    if result.returncode != 0:
        raise SystemExit(f"generation against {endpoint} failed:\n{result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def unpack(tarball: Path, into: Path, keep_only_baseline: bool) -> Path:
    with tarfile.open(tarball) as archive:
        extract_all(archive, into)
    bin_dir = into / "clusterpanel-runtime" / "bin"
    if keep_only_baseline:
        for variant in bin_dir.glob("libggml-cpu-*.so"):
            if variant.name != "libggml-cpu-x64.so":
                variant.unlink()
    return bin_dir


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    import django

    django.setup()
    from nodes.runtime.bundle import find_bundle

    bundle = find_bundle()
    work = Path(tempfile.mkdtemp(prefix="bench-variants-"))
    servers = []
    try:
        configs = {}
        for label, baseline in (("as shipped (best variant)", False), ("baseline x86-64 only", True)):
            process, port, variant = start_server(unpack(bundle.tarball, work / label[:8], baseline), args.threads)
            servers.append(process)
            configs[label] = {"endpoint": f"127.0.0.1:{port}", "variant": variant, "prefill": [], "decode": []}
        for _ in range(args.rounds):
            for config in configs.values():
                run = generate_once(config["endpoint"], args.tokens)
                config["prefill"].append(run["prefill"])
                config["decode"].append(run["decode"])
                prompt_tokens = run["prompt_tokens"]
    finally:
        for process in servers:
            process.terminate()
            process.wait()
        shutil.rmtree(work, ignore_errors=True)

    shipped = next(iter(configs.values()))
    print(f"SmolLM2-135M Q4_1, all layers on one local ggml-rpc-server, {args.threads} threads, "
          f"{args.rounds} alternating rounds; prompt {prompt_tokens} tokens, {args.tokens} generated\n")
    print("| bundle | CPU variant loaded | prompt tok/s (median, min–max) | ratio | "
          "decode tok/s (median, min–max) | ratio |")
    print("|---|---|---|---|---|---|")
    for label, config in configs.items():
        cells = []
        for kind in ("prefill", "decode"):
            rates, median = config[kind], statistics.median(config[kind])
            cells.append(f"{median:.0f} ({min(rates):.0f}–{max(rates):.0f}) | "
                         f"{median / statistics.median(shipped[kind]):.2f}")
        print(f"| {label} | {config['variant']} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
