"""The head's side of bench/gpu_check.sh: one model, all of it on one rpc-server's device, greedy tokens timed.

    python bench/gpu_check_client.py --endpoint 127.0.0.1:50052 --model SmolLM2.gguf --tokens 64 --log load.log

Registers the server as the engine does (models_app/llamacpp/libllama.py), loads every layer onto its one device
(split mode "none", device 0: RPC devices come first, so a GPU of the head's own is never used), warms up on
another prompt, then generates a fixed number of tokens greedily, end of text or not, so every run times the
same count. llama.cpp's log goes to --log; what it says about placement comes back parsed. Prints one JSON line.
"""

import argparse
import contextlib
import json
import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROMPT = "The history of the lighthouse at the end of the harbour begins"
WARM_UP = "Warm up."
OFFLOADED = re.compile(r"offloaded (\d+)/(\d+) layers")
MODEL_BUFFER = re.compile(r"(?m)^\w+: +(\S+?) model buffer size = +([\d.]+) MiB$")


@contextlib.contextmanager
def stderr_into(path: Path) -> Iterator[None]:
    """llama.cpp writes its log to file descriptor 2 from C; send it to `path` meanwhile."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def placement(log: str) -> dict:
    """Layers llama.cpp offloaded and the MiB of weights each device holds, from its load log."""
    found = OFFLOADED.findall(log)
    buffers = {device: float(mib) for device, mib in MODEL_BUFFER.findall(log)}
    return {"offloaded": f"{found[-1][0]}/{found[-1][1]}" if found else None, "model_buffers_mib": buffers}


def load(endpoint: str, model: str, ctx: int):
    from models_app.llamacpp import libllama

    libllama.register_rpc_servers([endpoint])
    import llama_cpp

    # No repacking on the head: it computes nothing here, and on some CPUs its AMX kernels trap (architecture.md).
    with libllama.model_params(extra_buffers=False):
        return llama_cpp.Llama(model_path=model, n_ctx=ctx, seed=1, verbose=True, n_gpu_layers=-1,
                               split_mode=llama_cpp.LLAMA_SPLIT_MODE_NONE, main_gpu=0)


def greedy(llm, prompt: str, count: int) -> tuple[list[int], list[float]]:
    """`count` greedy tokens after `prompt`, each with the moment it arrived (seconds since the prompt was sent)."""
    llm.reset()
    llm._ctx.kv_cache_clear()
    tokens, moments = [], []
    start = time.perf_counter()
    for token in llm.generate(llm.tokenize(prompt.encode()), temp=0.0, repeat_penalty=1.0):
        tokens.append(token)
        moments.append(time.perf_counter() - start)
        if len(tokens) == count:
            break
    return tokens, moments


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--prompt", default=PROMPT)
    parser.add_argument("--ctx", type=int, default=512)
    parser.add_argument("--log", type=Path, required=True)
    args = parser.parse_args()
    with stderr_into(args.log):
        started = time.perf_counter()
        llm = load(args.endpoint, args.model, args.ctx)
        load_s = time.perf_counter() - started
        greedy(llm, WARM_UP, 4)  # first use: a Vulkan driver builds its pipelines here, not in the timed run
        tokens, moments = greedy(llm, args.prompt, args.tokens)
    decode_s = moments[-1] - moments[0]
    print(json.dumps({
        "endpoint": args.endpoint,
        "prompt": args.prompt,
        "tokens": tokens,
        "pieces": [llm.detokenize([t]).decode(errors="replace") for t in tokens],
        "load_s": round(load_s, 3),
        "first_token_s": round(moments[0], 4),
        "decode_tok_s": round((len(tokens) - 1) / decode_s, 2) if decode_s > 0 else None,
        **placement(args.log.read_text(errors="replace")),
    }), flush=True)


if __name__ == "__main__":
    main()
