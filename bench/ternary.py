"""Ternary models against Q4_0 on the same simulated laptops: memory per laptop, predicted against measured, and
tokens/s.

One llama model is written here in f16 (tests/models_app/ternary_files.py: random weights, SmolLM2's tokenizer, the
output tied to the embedding, every width a multiple of 256) and quantized by llama.cpp's own quantizer to Q4_0,
TQ2_0 and TQ1_0. Each is split evenly over two simulated laptops (real sshd; the runtime bundle's rpc-server
reached through OpenSSH tunnels, as the panel runs it):

1. Memory: fresh servers, one prompt that fills the context (the most a request makes llama.cpp touch), then each
   server's resident memory (and the head's growth) against the planner's prediction for that machine, and
   llama.cpp's own weights buffer against the planned weights. Target: ±5 % or ±32 MiB, whichever is larger.
2. Speed: `--rounds` rounds, the three types in turns (the order rotated each round), each a fresh load over the
   laptops and one on the head alone (llama.cpp in one process, same file; which goes first alternates), answering
   one chat greedily for `--tokens` tokens: tokens/s (median), and the first token where the laptops' answer parts
   from the head's alone, as Verify runs it (the head's CPU kernels, repacked where llama.cpp repacks) and with
   the head's weights unrepacked (the arithmetic of the laptops' rpc-servers, which never repack).

    .venv/bin/python bench/ternary.py [--layers 12] [--embd 1024] [--ffn 2816] [--ctx 2048] [--rounds 5]
        [--tokens 64]
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lan import ROOT, bench_lan, with_runtime
from vulkan_device import PORT, first_difference, servers

INSTALL_DIR = "~/.clusterpanel-bench"
KINDS = ["Q4_0", "TQ2_0", "TQ1_0"]
CHAT = [{"role": "user", "content": "List the planets of the solar system in order, one per line."}]
MiB = 2**20


def make_files(folder: Path, layers: int, embd: int, ffn: int) -> dict[str, Path]:
    from tests.models_app.ternary_files import quantize, write_llama_model

    started = time.monotonic()
    source = write_llama_model(folder / "f16.gguf", layers=layers, embd=embd, ffn=ffn)
    files = {kind: quantize(source, folder / f"{kind}.gguf", kind) for kind in KINDS}
    print(f"wrote the f16 model ({source.stat().st_size / MiB:.0f} MiB) and quantized it in "
          f"{time.monotonic() - started:.0f} s", flush=True)
    source.unlink()
    return files


def plan_for(path: Path, ctx: int):
    from models_app.gguf.meta import read_metadata
    from models_app.planning import planner

    shape = planner.shape_of(read_metadata(path))
    laptops = [planner.Machine(f"laptop {n}", 8 << 30, 5.0) for n in (1, 2)]
    return planner.plan_mode("even", shape, planner.Machine("head", 8 << 30, 5.0), laptops,
                             planner.Options(ctx=ctx, head_may_hold_layers=False))


def server_rss(node) -> int:
    from nodes.remote import ssh
    from nodes.servers import rpcserver

    pid = rpcserver.state(node, INSTALL_DIR, PORT).pid
    return int(ssh.run(node, ["ps", "-o", "rss=", "-p", str(pid)]).stdout.strip()) * 1024


def memory_rows(nodes: list, kind: str, path: Path, ctx: int) -> list[str]:
    from models_app.llamacpp import oneshot

    plan = plan_for(path, ctx)
    with servers(nodes, [["CPU"]] * len(nodes)) as endpoints:
        answer = oneshot.complete(endpoints, "hello world and", 4, model=path, n_gpu_layers=plan.n_gpu_layers,
                                  tensor_split=plan.tensor_split, ctx=ctx, timeout=900, fill_context=True,
                                  while_loaded=lambda pid: [oneshot.rss_bytes(pid), *map(server_rss, nodes)])
    measured = answer["measured"]
    measured[0] -= answer["rss_before_load"]
    by_endpoint = {name.partition("[")[2].rstrip("]"): kinds for name, kinds in answer["buffers"].items()}
    allocated = [answer["buffers"].get("CPU", {}), *(by_endpoint.get(endpoint, {}) for endpoint in endpoints)]
    rows = []
    for stage, value, buffers in zip(plan.stages, measured, allocated, strict=True):
        predicted, error = stage.memory.total, stage.memory.total - value
        within = abs(error) <= max(0.05 * value, 32 * MiB)
        layers = f"{stage.count - 1} + output" if stage is plan.stages[-1] else str(stage.count)
        rows.append(f"| {kind} | {stage.machine.name} | {layers} | {stage.memory.weights / MiB:.1f} | "
                    f"{buffers.get('model', 0) / MiB:.1f} | {predicted / MiB:.1f} | {value / MiB:.1f} | "
                    f"{error / MiB:+.1f} | {100 * error / value:+.1f} | {'yes' if within else 'NO'} |")
    return rows


def speeds(nodes: list, files: dict[str, Path], ctx: int, rounds: int, tokens: int) -> None:
    from models_app.llamacpp import oneshot

    rates: dict[str, dict[str, list[float]]] = {kind: {"laptops": [], "head": []} for kind in KINDS}
    answers: dict[str, dict[str, list[str]]] = {kind: {} for kind in KINDS}
    for round_ in range(rounds):
        for kind in KINDS[round_ % len(KINDS):] + KINDS[:round_ % len(KINDS)]:
            for where in (["laptops", "head"] if round_ % 2 == 0 else ["head", "laptops"]):
                answer = on_laptops(nodes, files[kind], ctx, tokens) if where == "laptops" else oneshot.complete(
                    [], "", tokens, model=files[kind], n_gpu_layers=0, ctx=ctx, chat=CHAT, timeout=900)
                rates[kind][where].append(answer["completion_tokens"] / answer["seconds"])
                answers[kind][where] = answer["pieces"]
            print(f"round {round_ + 1}: {kind} {rates[kind]['laptops'][-1]:.1f} tok/s over the laptops, "
                  f"{rates[kind]['head'][-1]:.1f} on the head alone", flush=True)
    base = statistics.median(rates["Q4_0"]["laptops"])
    print(f"\n| type | file MiB | weights per laptop MiB | tokens/s over 2 laptops (median of {rounds}) | ÷ Q4_0 | "
          "tokens/s head alone | greedy answer over the laptops against the head alone: as Verify runs it | "
          "with the head's kernels unrepacked |")
    print("|---|---:|---|---:|---:|---:|---|---|")
    for kind in KINDS:
        weights = " / ".join(f"{stage.memory.weights / MiB:.1f}" for stage in plan_for(files[kind], ctx).stages[1:])
        laptops, head = (statistics.median(rates[kind][where]) for where in ("laptops", "head"))
        ours = answers[kind]["laptops"]
        print(f"| {kind} | {files[kind].stat().st_size / MiB:.1f} | {weights} | {laptops:.1f} | {laptops / base:.2f} | "
              f"{head:.1f} | {first_difference(ours, answers[kind]['head'])} | "
              f"{first_difference(ours, unrepacked(files[kind], ctx, tokens))} |")


def on_laptops(nodes: list, path: Path, ctx: int, tokens: int) -> dict:
    from models_app.llamacpp import oneshot

    plan = plan_for(path, ctx)
    with servers(nodes, [["CPU"]] * len(nodes)) as endpoints:
        return oneshot.complete(endpoints, "", tokens, model=path, n_gpu_layers=plan.n_gpu_layers,
                                tensor_split=plan.tensor_split, ctx=ctx, chat=CHAT, timeout=900)


# The head alone without llama.cpp's extra buffer types (weights repacked for the head's CPU, as for Q4_0 on AVX2):
# the laptops' rpc-servers never repack, so this is the same arithmetic as theirs.
UNREPACKED = """
import json, sys
from models_app.llamacpp import libllama
with libllama.model_params(extra_buffers=False):
    from llama_cpp import Llama
    llm = Llama(model_path=sys.argv[1], n_ctx=int(sys.argv[2]), seed=1, verbose=False, n_gpu_layers=0)
    chunks = llm.create_chat_completion(json.loads(sys.argv[3]), max_tokens=int(sys.argv[4]), temperature=0.0,
                                        stream=True)
    print(json.dumps([c["choices"][0]["delta"].get("content", "") for c in chunks]))
"""


def unrepacked(path: Path, ctx: int, tokens: int) -> list[str]:
    done = subprocess.run([sys.executable, "-c", UNREPACKED, str(path), str(ctx), json.dumps(CHAT), str(tokens)],
                          capture_output=True, text=True, cwd=ROOT, timeout=900, check=True)
    return [piece for piece in json.loads(done.stdout.strip().splitlines()[-1]) if piece]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--embd", type=int, default=1024)
    parser.add_argument("--ffn", type=int, default=2816)
    parser.add_argument("--ctx", type=int, default=2048)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ternary-") as scratch, \
            bench_lan(2, name="btern", subnet="10.224.0.0/24") as lan:
        nodes = with_runtime(lan, INSTALL_DIR)
        files = make_files(Path(scratch), args.layers, args.embd, args.ffn)
        print("\n| type | machine | layers | planned weights MiB | llama.cpp weights buffer MiB | predicted MiB | "
              "measured MiB | error MiB | error % | within ±5 % or ±32 MiB |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
        for kind in KINDS:
            print("\n".join(memory_rows(nodes, kind, files[kind], args.ctx)), flush=True)
        speeds(nodes, files, args.ctx, args.rounds, args.tokens)


if __name__ == "__main__":
    main()
