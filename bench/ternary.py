"""Ternary models against Q4_0 on the same simulated laptops: memory per laptop, predicted against measured, and
tokens/s.

One llama model is written here in f16 (tests/models_app/ternary_files.py: random weights, SmolLM2's tokenizer, the
output tied to the embedding, every width a multiple of 256) and quantized by llama.cpp's own quantizer to Q4_0,
TQ2_0 and TQ1_0. Each is split evenly over two simulated laptops (real sshd; the runtime bundle's rpc-server
reached through OpenSSH tunnels, as the panel runs it):

1. Memory: fresh servers, one prompt that fills the context (the most a request makes llama.cpp touch), then each
   server's resident memory (and the head's growth) against the planner's prediction for that machine, and
   llama.cpp's own weights buffer against the planned weights. Target: ±5 % or ±32 MiB, whichever is larger.
2. Speed: `--rounds` rounds, the three types in turns (the order rotated each round), each a fresh load answering
   one chat greedily for `--tokens` tokens: tokens/s (median), and the first token where the answer parts from
   the head's alone (llama.cpp in one process, same file).

    .venv/bin/python bench/ternary.py [--layers 12] [--embd 1024] [--ffn 2816] [--ctx 2048] [--rounds 3]
        [--tokens 64]
"""

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from lan import bench_lan, with_runtime
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
    from models_app import planner
    from models_app.gguf_meta import read_metadata

    shape = planner.shape_of(read_metadata(path))
    laptops = [planner.Machine(f"laptop {n}", 8 << 30, 5.0) for n in (1, 2)]
    return planner.plan_mode("even", shape, planner.Machine("head", 8 << 30, 5.0), laptops,
                             planner.Options(ctx=ctx, head_may_hold_layers=False))


def server_rss(node) -> int:
    from nodes import rpcserver, ssh

    pid = rpcserver.state(node, INSTALL_DIR, PORT).pid
    return int(ssh.run(node, ["ps", "-o", "rss=", "-p", str(pid)]).stdout.strip()) * 1024


def memory_rows(nodes: list, kind: str, path: Path, ctx: int) -> list[str]:
    from jobs.engine import oneshot

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
        rows.append(f"| {kind} | {stage.machine.name} | {stage.count} | {stage.memory.weights / MiB:.1f} | "
                    f"{buffers.get('model', 0) / MiB:.1f} | {predicted / MiB:.1f} | {value / MiB:.1f} | "
                    f"{error / MiB:+.1f} | {100 * error / value:+.1f} | {'yes' if within else 'NO'} |")
    return rows


def speeds(nodes: list, files: dict[str, Path], ctx: int, rounds: int, tokens: int) -> None:
    from jobs.engine import oneshot

    alone = {kind: oneshot.complete([], "", tokens, model=path, n_gpu_layers=0, ctx=ctx, chat=CHAT, timeout=900)
             for kind, path in files.items()}
    rates: dict[str, list[float]] = {kind: [] for kind in KINDS}
    parted: dict[str, set[str]] = {kind: set() for kind in KINDS}
    for round_ in range(rounds):
        for kind in KINDS[round_ % len(KINDS):] + KINDS[:round_ % len(KINDS)]:
            plan = plan_for(files[kind], ctx)
            with servers(nodes, [["CPU"]] * len(nodes)) as endpoints:
                answer = oneshot.complete(endpoints, "", tokens, model=files[kind], n_gpu_layers=plan.n_gpu_layers,
                                          tensor_split=plan.tensor_split, ctx=ctx, chat=CHAT, timeout=900)
            rates[kind].append(answer["completion_tokens"] / answer["seconds"])
            parted[kind].add(first_difference(answer["pieces"], alone[kind]["pieces"]))
            print(f"round {round_ + 1}: {kind} {rates[kind][-1]:.1f} tok/s", flush=True)
    base = statistics.median(rates["Q4_0"])
    print(f"\n| type | file MiB | weights per laptop MiB | tokens/s over 2 laptops (median of {rounds}) | "
          "÷ Q4_0 | tokens/s head alone | greedy tokens against the head alone |")
    print("|---|---:|---|---:|---:|---:|---|")
    for kind in KINDS:
        layers = " / ".join(f"{stage.memory.weights / MiB:.1f}" for stage in plan_for(files[kind], ctx).stages[1:])
        mine = statistics.median(rates[kind])
        head = alone[kind]["completion_tokens"] / alone[kind]["seconds"]
        print(f"| {kind} | {files[kind].stat().st_size / MiB:.1f} | {layers} | {mine:.1f} | {mine / base:.2f} | "
              f"{head:.1f} | {', '.join(sorted(parted[kind]))} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--embd", type=int, default=1024)
    parser.add_argument("--ffn", type=int, default=2816)
    parser.add_argument("--ctx", type=int, default=2048)
    parser.add_argument("--rounds", type=int, default=3)
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
