"""One greedy completion across RPC servers, in a throwaway process.

    python -m jobs.oneshot --endpoint 10.0.0.2:50052 [--endpoint ...] --prompt TEXT --max-tokens N

Prints one JSON line: the text, token counts and speed. A server that vanishes
aborts only this process, which is the point (see jobs/llamacpp.py).
`complete()` also reads llama.cpp's log to tell which device each layer went to.
"""


import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

from jobs.llamacpp import LlamaCppError

LAYER_PLACED = re.compile(r"layer +(\d+) assigned to device (\S+?),")


def complete(endpoints: list[str], prompt: str, max_tokens: int, model: Path | None = None,
             n_gpu_layers: int = 999, tensor_split: tuple[int, ...] = (), ctx: int = 512,
             timeout: float = 300) -> dict:
    argv = [sys.executable, "-m", "jobs.oneshot", "--prompt", prompt, "--max-tokens", str(max_tokens),
            "--n-gpu-layers", str(n_gpu_layers), "--ctx", str(ctx)]
    argv += ["--tensor-split", ",".join(str(x) for x in tensor_split)] if tensor_split else []
    argv += [part for endpoint in endpoints for part in ("--endpoint", endpoint)]
    argv += ["--model", str(model)] if model else []
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                                cwd=Path(__file__).resolve().parent.parent)
    except subprocess.TimeoutExpired:
        raise LlamaCppError(f"the completion did not finish within {timeout:.0f} s") from None
    if result.returncode != 0:
        tail = result.stderr.strip().splitlines()[-3:]
        raise LlamaCppError(f"the completion process failed (exit {result.returncode}): {' / '.join(tail)}")
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    answer["placement"] = {int(layer): device for layer, device in LAYER_PLACED.findall(result.stderr)}
    return answer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", action="append", default=[])
    parser.add_argument("--prompt", required=True)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--n-gpu-layers", type=int, default=999)
    parser.add_argument("--model")
    parser.add_argument("--tensor-split", default="")
    parser.add_argument("--ctx", type=int, default=512)
    args = parser.parse_args()

    from jobs import llamacpp
    from models_app.bundled import bundled_model_path

    if args.endpoint:
        llamacpp.register_rpc_servers(args.endpoint)
    from llama_cpp import Llama

    split = [float(x) for x in args.tensor_split.split(",")] if args.tensor_split else None
    llm = Llama(model_path=args.model or str(bundled_model_path()), n_ctx=args.ctx, seed=1, verbose=True,
                n_gpu_layers=args.n_gpu_layers if args.endpoint else 0, tensor_split=split)
    start = time.perf_counter()
    out = llm(args.prompt, max_tokens=args.max_tokens, temperature=0.0)
    seconds = time.perf_counter() - start
    print(json.dumps({"text": out["choices"][0]["text"], "completion_tokens": out["usage"]["completion_tokens"],
                      "prompt_tokens": out["usage"]["prompt_tokens"], "seconds": seconds}))


if __name__ == "__main__":
    main()
