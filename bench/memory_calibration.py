"""Measure what llama.cpp keeps resident at its peak, and fit the planner's memory terms to it.

For each model and context, the model is split over local ggml-rpc-servers from
the runtime bundle (the same binary the laptops run) and given one prompt that
fills the context, so the last micro-batch is a full one at a full context:
the most a request can make llama.cpp touch. Then, while it is still loaded,
each server's RSS and the head process's growth are read. Models: the bundled
SmolLM2 (llama, Q4_1, tied embeddings) and two qwen2 files of other shapes (f16)
written with the `gguf` package.

    .venv/bin/python bench/memory_calibration.py [--write-fixture] [--contexts 512,1024,2048,4096] [--slots 1,4]

With --slots N the context is made as a deployment's engine makes it for N
people at once (N sequences of the context each, every one in its own KV
stream). llama.cpp clears the whole KV cache when it makes the context, so every
stream is resident from the start; filling the first is enough for the peak.

Prints the measurements against the planner's prediction (with the calibration
in models_app/planning/planner.py) and the least-squares fit of the calibration terms.
--write-fixture stores the measurements in tests/models_app/fixtures/.
"""

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import asdict
from itertools import product
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from scripts.llama_source import extract_all  # noqa: E402

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clusterpanel.settings")
FIXTURE = ROOT / "tests" / "models_app" / "fixtures" / "memory_measurements.json"
MiB = 2**20

# (name, how to get the file, counts: head then each server; the output layer counts)
MODELS = [
    ("smollm2-135m-q4_1", None, [0, 10, 10, 11]),
    ("qwen2-6x768-f16", dict(layers=6, embd=768, ffn=7168, seed=0), [0, 2, 2, 3]),
    ("qwen2-8x512-f16", dict(layers=8, embd=512, ffn=2048, seed=1), [0, 4, 5]),
]


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def start_servers(bin_dir: Path, count: int) -> list[tuple[subprocess.Popen, int]]:
    from bench.cpu_variants import start_server

    return [start_server(bin_dir, threads=2)[:2] for _ in range(count)]


def measure(model: Path, counts: list[int], ctx: int, bin_dir: Path, slots: int = 1) -> dict:
    """Resident memory at the peak, and llama.cpp's own allocations (head first, then each server)."""
    from models_app.llamacpp import oneshot

    servers = start_servers(bin_dir, len(counts) - 1)
    prompt = " ".join(["hello world and"] * ((ctx - 24) // 3))  # three tokens each: fills the context
    try:
        answer = oneshot.complete([f"127.0.0.1:{port}" for _, port in servers], prompt, 4, model=model,
                                  n_gpu_layers=sum(counts[1:]), tensor_split=tuple(counts[1:]), ctx=ctx,
                                  slots=slots, timeout=900, while_loaded=lambda pid: {
                                      "head": rss(pid), "servers": [rss(p.pid) for p, _ in servers]})
    finally:
        for process, _ in servers:
            process.kill()
            process.wait()
    measured = answer["measured"]
    return {"ctx": ctx, "slots": slots, "counts": counts, "prompt_tokens": answer["prompt_tokens"],
            "head_growth": measured["head"] - answer["rss_before_load"], "servers_rss": measured["servers"],
            "allocated": [answer["buffers"].get("CPU", {}),
                          *(answer["buffers"].get(f"RPC0[127.0.0.1:{port}]", {}) for _, port in servers)]}


def predicted(run: dict, calibration=None) -> list:
    """The planner's memory per machine for a fixture run: head first, then each server."""
    from models_app.planning import planner

    shape = planner.ModelShape(**{**run["shape"], "layer_bytes": tuple(run["shape"]["layer_bytes"])})
    options = planner.Options(ctx=run["ctx"], slots=run.get("slots", 1),
                              **({"calibration": calibration} if calibration else {}))
    roomy = planner.Machine("head", 1 << 50, 10.0)
    laptops = [planner.Machine(f"lab-{i}", 1 << 50, 10.0) for i in range(len(run["counts"]) - 1)]
    plan = planner.build("manual", shape, roomy, laptops, run["counts"], options)
    return [stage.memory for stage in plan.stages]


def fit(runs: list[dict]) -> dict:
    """Least squares for the terms beyond weights and KV cache, servers and head apart."""
    rows, target, head_rows, head_target = [], [], [], []
    for run in runs:
        shape, u, c = run["shape"], min(512, run["ctx"]), run["ctx"]
        memory = predicted(run)
        for stage, resident in zip(memory[1:], run["servers_rss"], strict=True):
            rows.append([1, u * c * shape["n_head"], u * shape["n_ff"], u * shape["n_embd"]])
            target.append(resident - stage.weights - stage.kv_cache)
        head = memory[0]
        head_rows.append([1, u * c, u * shape["n_embd"]])
        head_target.append(run["head_growth"] - head.weights - shape["vocab_size"] * 4)
    server, *_ = np.linalg.lstsq(np.array(rows, float), np.array(target, float), rcond=None)
    head, *_ = np.linalg.lstsq(np.array(head_rows, float), np.array(head_target, float), rcond=None)
    return {"server_base_mib": server[0] / MiB, "attention": server[1], "feed_forward": server[2],
            "hidden": server[3], "head_base_mib": head[0] / MiB, "head_mask": head[1], "head_hidden": head[2]}


def report(runs: list[dict]) -> None:
    from models_app.planning.planner import CALIBRATION

    print("| model | ctx | slots | machine | measured MiB | predicted MiB | error MiB | error % | "
          "within ±5 % or ±32 MiB |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---|")
    for run in runs:
        memory = predicted(run)
        measured = [run["head_growth"], *run["servers_rss"]]
        for index, (stage, value) in enumerate(zip(memory, measured, strict=True)):
            error = stage.total - value
            ok = abs(error) <= max(0.05 * value, 32 * MiB)
            name = "head" if index == 0 else f"server {index}"
            print(f"| {run['model']} | {run['ctx']} | {run.get('slots', 1)} | {name} | {value / MiB:.1f} | "
                  f"{stage.total / MiB:.1f} | "
                  f"{error / MiB:+.1f} | {100 * error / value:+.1f} | {'yes' if ok else 'NO'} |")
    print()
    print("current calibration:", asdict(CALIBRATION))
    print("least-squares fit:  ", {k: round(v, 2) for k, v in fit(runs).items()})


def merged(stored: list[dict], new: list[dict]) -> list[dict]:
    def key(run: dict) -> tuple:
        return run["model"], run["ctx"], run.get("slots", 1)

    replaced = {key(run) for run in new}
    return [run for run in stored if key(run) not in replaced] + new


def main() -> None:
    import django

    django.setup()
    from models_app.gguf.meta import read_metadata
    from models_app.library.bundled import bundled_model_path
    from nodes.runtime.bundle import find_bundle
    from tests.models_app.gguf_files import write_loadable_model

    parser = argparse.ArgumentParser()
    parser.add_argument("--contexts", default="512,1024,2048,4096")
    parser.add_argument("--slots", default="1", help="sequences at once, comma-separated (each is measured)")
    parser.add_argument("--models", help="only these models (names as in MODELS, comma-separated)")
    parser.add_argument("--write-fixture", action="store_true")
    parser.add_argument("--add-to-fixture", action="store_true",
                        help="add these runs to the stored ones (replacing runs of the same model, ctx and slots)")
    parser.add_argument("--from-fixture", action="store_true", help="only report on the stored measurements")
    args = parser.parse_args()
    if args.from_fixture:
        report(json.loads(FIXTURE.read_text())["runs"])
        return
    runs = []
    with tempfile.TemporaryDirectory(prefix="calibrate-") as scratch:
        scratch = Path(scratch)
        with tarfile.open(find_bundle().tarball) as archive:
            extract_all(archive, scratch)
        bin_dir = scratch / "clusterpanel-runtime" / "bin"
        for name, spec, counts in MODELS:
            if args.models and name not in args.models.split(","):
                continue
            path = bundled_model_path() if spec is None else write_loadable_model(scratch / f"{name}.gguf", **spec)
            from models_app.planning.planner import shape_of

            shape = asdict(shape_of(read_metadata(path)))
            contexts, slot_counts = [int(c) for c in args.contexts.split(",")], [int(n) for n in args.slots.split(",")]
            for ctx, slots in product(contexts, slot_counts):
                started = time.monotonic()
                run = {"model": name, "shape": shape, **measure(path, counts, ctx, bin_dir, slots)}
                runs.append(run)
                print(f"measured {name} at ctx {ctx}, {slots} slots in {time.monotonic() - started:.0f} s",
                      file=sys.stderr)
    report(runs)
    if args.add_to_fixture:
        runs = merged(json.loads(FIXTURE.read_text())["runs"], runs)
    if args.write_fixture or args.add_to_fixture:
        FIXTURE.parent.mkdir(exist_ok=True)
        FIXTURE.write_text(json.dumps({"command": "bench/memory_calibration.py --write-fixture", "runs": runs},
                                      indent=1) + "\n")
        print(f"wrote {FIXTURE}", file=sys.stderr)


if __name__ == "__main__":
    main()
