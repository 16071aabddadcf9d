"""What splitting costs: decode tokens/s of the same model on the head alone and across 1, 2 and 3 simulated
laptops (1 Gbit links, even split, servers reached directly on the LAN), in alternating rounds. Two models:
the bundled SmolLM2 (93 MB on the laptops: per-token round trips dominate) and a qwen2 test model of
12 layers (486 MB: compute dominates).

    .venv/bin/python bench/distribution_cost.py [--rounds 3] [--tokens 48]
"""

import argparse
import statistics
import tempfile
from pathlib import Path

from heterogeneous import INSTALL_DIR, PORT, PROMPT
from lan import bench_lan, with_runtime


def tokens_per_s(model: Path, endpoints: list[str], n_layer: int, tokens: int) -> float:
    from models_app.llamacpp import oneshot
    from models_app.planning.planner import proportional_counts

    split = tuple(proportional_counts(n_layer + 1, [1.0] * len(endpoints))) if endpoints else ()
    answer = oneshot.complete(endpoints, PROMPT, tokens, model=model, n_gpu_layers=n_layer + 1 if endpoints else 0,
                              tensor_split=split, ctx=512, timeout=600)
    return answer["completion_tokens"] / answer["seconds"]


def two_models(scratch: Path) -> dict[str, Path]:
    """One where per-token round trips dominate, one where compute does."""
    from models_app.library.bundled import bundled_model_path
    from tests.models_app.gguf_files import write_loadable_model

    return {"SmolLM2 135M Q4_1 (bundled)": bundled_model_path(),
            "qwen2 test model, 12 layers f16": write_loadable_model(scratch / "q12.gguf", layers=12)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=48)
    args = parser.parse_args()
    with bench_lan(3, rate="1gbit", name="bdist", subnet="10.243.0.0/24") as lan, \
            tempfile.TemporaryDirectory(prefix="dist-") as scratch:
        from models_app.gguf.meta import read_metadata
        from nodes.servers import rpcserver

        models = two_models(Path(scratch))
        nodes = with_runtime(lan, INSTALL_DIR)
        for node in nodes:
            rpcserver.start(node, INSTALL_DIR, PORT, bind=node.host)
        endpoints = [f"{node.host}:{PORT}" for node in nodes]
        setups = {"head only": [], "1 laptop": endpoints[:1], "2 laptops": endpoints[:2], "3 laptops": endpoints}
        results = {(m, s): [] for m in models for s in setups}
        try:
            for _ in range(args.rounds):
                for name, path in models.items():
                    n_layer = read_metadata(path).n_layer
                    for setup, used in setups.items():
                        results[(name, setup)].append(tokens_per_s(path, used, n_layer, args.tokens))
        finally:
            for node in nodes:
                rpcserver.stop(node, INSTALL_DIR, PORT)
    print(f"\n{args.rounds} alternating rounds of {args.tokens} greedy tokens; laptops on 1 Gbit links, "
          "even split, direct LAN mode\n")
    print("| model | where | decode tok/s (median) | ratio to head only |")
    print("|---|---|---:|---:|")
    for name in models:
        base = statistics.median(results[(name, "head only")])
        for setup in setups:
            value = statistics.median(results[(name, setup)])
            print(f"| {name} | {setup} | {value:.1f} | {value / base:.2f} |")


if __name__ == "__main__":
    main()
