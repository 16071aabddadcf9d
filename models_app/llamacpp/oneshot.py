"""One greedy completion across RPC servers, in a throwaway process.

    python -m models_app.llamacpp.oneshot --endpoint 10.0.0.2:50052 [--endpoint ...] --prompt TEXT --max-tokens N

Prints one JSON line: the text, token counts and speed. A server that vanishes
aborts only this process, which is the point (see models_app/llamacpp/libllama.py).
`complete()` also reads llama.cpp's log to tell which device each layer went to.
"""


import argparse
import contextlib
import json
import logging
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from models_app.llamacpp import cpucheck
from models_app.llamacpp.libllama import LlamaCppError

logger = logging.getLogger(__name__)

LAYER_PLACED = re.compile(r"layer +(\d+) assigned to device (\S+?),")
# What ggml prints as it aborts: "/…/ggml-backend.cpp:1872: GGML_ASSERT(n_backends <= …) failed".
GGML_ABORTED = re.compile(r"(?m)^/\S*?([\w.-]+\.(?:c|cpp|h)):\d+: (.+)$")
BUFFER_SIZE = re.compile(r"(?m)^\w+: +(\S+?)(?:_Mapped)? +(model|KV|compute|output) buffer size = +([\d.]+) MiB$")


def complete(endpoints: list[str], prompt: str, max_tokens: int, model: Path | None = None,
             n_gpu_layers: int = 999, tensor_split: tuple[int, ...] = (), ctx: int = 512,
             timeout: float = 300, while_loaded: Callable[[int], dict] | None = None,
             fill_context: bool = False, chat: list[dict] | None = None, slots: int = 1, repack: bool = True) -> dict:
    """Run the completion; `while_loaded(pid)` is called after it while the model is still loaded
    (to measure memory), and what it returns is kept under "measured". `fill_context` repeats the
    prompt's tokens until the context is full: the most memory a request can make llama.cpp touch.
    `chat`: messages to answer with the model's chat template instead of `prompt`. The answer has
    "pieces", the text of each generated token. `slots`: the context is made as a deployment's engine makes
    it, for that many sequences of `ctx` tokens each (llama.cpp clears every sequence's KV cache when it makes
    the context, so all of it is resident from the start; `fill_context` fills the first). `repack` False: the
    head's weights stay as the file has them, the arithmetic of the laptops' rpc-servers, which never repack."""
    # "--option=value": a prompt that begins with "-" is still the prompt, not an option.
    argv = [sys.executable, "-m", "models_app.llamacpp.oneshot", f"--prompt={prompt}", "--max-tokens", str(max_tokens),
            "--n-gpu-layers", str(n_gpu_layers), "--ctx", str(ctx)]
    argv += ["--tensor-split", ",".join(str(x) for x in tensor_split)] if tensor_split else []
    argv += [part for endpoint in endpoints for part in ("--endpoint", endpoint)]
    argv += ["--model", str(model)] if model else []
    argv += ["--hold"] if while_loaded else []
    argv += ["--fill-context"] if fill_context else []
    argv += [f"--chat={json.dumps(chat)}"] if chat else []
    argv += ["--slots", str(slots)] if slots > 1 else []
    argv += [] if repack else ["--no-repack"]
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, cwd=Path(__file__).resolve().parents[2])
    errors: list[str] = []
    drain = threading.Thread(target=lambda: errors.extend(process.stderr), daemon=True)
    drain.start()
    timer = threading.Timer(timeout, process.kill)
    timer.start()
    try:
        line = process.stdout.readline()
        measured = while_loaded(process.pid) if (while_loaded and line) else None
        process.stdin.close()
        process.wait()
    finally:
        timer.cancel()
    drain.join(5)
    log = "".join(errors)
    if process.returncode != 0 or not line:
        if process.returncode == -9:
            raise LlamaCppError(f"the completion did not finish within {timeout:.0f} s")
        raise LlamaCppError(failure(process.returncode, log))
    answer = json.loads(line)
    answer["placement"] = {int(layer): device for layer, device in LAYER_PLACED.findall(log)}
    answer["buffers"] = buffers_in(log)
    if measured is not None:
        answer["measured"] = measured
    return answer


def failure(returncode: int, log: str) -> str:
    """Why the completion process failed, in words: a death by a signal is named, never shown as its log's
    last lines (those went to the panel's log); an exit with an error keeps llama.cpp's own last words."""
    died = cpucheck.death_in_words(returncode)
    if died:
        logger.warning("the completion process %s; its log ended: %s", died, " / ".join(log.strip().splitlines()[-5:]))
        said = GGML_ABORTED.findall(log)
        return f"llama.cpp {died}" + (f" at {said[-1][0]}: {said[-1][1]}" if said else "")
    tail = log.strip().splitlines()[-3:]
    return f"the completion process failed (exit {returncode}): {' / '.join(tail)}"


def buffers_in(log: str) -> dict[str, dict[str, int]]:
    """What llama.cpp allocated on each device, by kind: {"RPC0[host:port]": {"model": bytes, ...}}."""
    found: dict[str, dict[str, int]] = {}
    for device, kind, mib in BUFFER_SIZE.findall(log):
        kinds = found.setdefault(device, {})
        kinds[kind] = kinds.get(kind, 0) + round(float(mib) * 2**20)
    return found


def rss_bytes(pid: int | str = "self") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", action="append", default=[])
    parser.add_argument("--prompt", required=True)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--n-gpu-layers", type=int, default=999)
    parser.add_argument("--model")
    parser.add_argument("--tensor-split", default="")
    parser.add_argument("--ctx", type=int, default=512)
    parser.add_argument("--hold", action="store_true", help="stay loaded until stdin closes")
    parser.add_argument("--fill-context", action="store_true", help="repeat the prompt until the context is full")
    parser.add_argument("--chat", help="messages (JSON) to answer with the model's chat template")
    parser.add_argument("--slots", type=int, default=1, help="sequences of --ctx tokens each, as the engine has")
    parser.add_argument("--no-repack", action="store_true", help="no weights repacked for this CPU")
    args = parser.parse_args()

    from models_app.library.bundled import bundled_model_path
    from models_app.llamacpp import libllama

    if args.endpoint:
        libllama.register_rpc_servers(args.endpoint)
    from llama_cpp import Llama

    split = [float(x) for x in args.tensor_split.split(",")] if args.tensor_split else None
    before = rss_bytes()
    kernels = libllama.model_params(extra_buffers=False) if args.no_repack else cpucheck.loading()
    with kernels, sequences(args.slots):
        llm = Llama(model_path=args.model or str(bundled_model_path()), n_ctx=args.ctx * args.slots, seed=1,
                    verbose=True, n_gpu_layers=args.n_gpu_layers if args.endpoint else 0, tensor_split=split)
    prompt = args.prompt
    if args.fill_context:
        tokens = llm.tokenize(args.prompt.encode(), add_bos=False) or [llm.token_eos()]
        room = args.ctx - args.max_tokens - 1
        prompt = [llm.token_bos(), *(tokens * (room // len(tokens) + 1))][:room]
    start = time.perf_counter()
    if args.chat:
        chunks = llm.create_chat_completion(json.loads(args.chat), max_tokens=args.max_tokens, temperature=0.0,
                                            stream=True)
        pieces = [c["choices"][0]["delta"].get("content", "") for c in chunks]
        pieces = [p for p in pieces if p]
        out = {"choices": [{"text": "".join(pieces)}],
               "usage": {"completion_tokens": len(pieces), "prompt_tokens": None}}
    else:
        out = llm(prompt, max_tokens=args.max_tokens, temperature=0.0)
        pieces = None
    seconds = time.perf_counter() - start
    print(json.dumps({"text": out["choices"][0]["text"], "completion_tokens": out["usage"]["completion_tokens"],
                      "prompt_tokens": out["usage"]["prompt_tokens"], "seconds": seconds, "pieces": pieces,
                      "rss_before_load": before}), flush=True)
    if args.hold:
        sys.stdin.read()  # the parent measures memory now, then closes our stdin


@contextlib.contextmanager
def sequences(slots: int) -> Iterator[None]:
    """Contexts made meanwhile hold `slots` sequences, each in its own KV stream, as the engine's do
    (llama-cpp-python takes no n_seq_max, so its default context parameters get one)."""
    from llama_cpp import llama as llama_module

    api = llama_module.llama_cpp
    original = api.llama_context_default_params

    def with_sequences():
        params = original()
        params.n_seq_max, params.kv_unified = slots, False
        return params

    api.llama_context_default_params = with_sequences
    try:
        yield
    finally:
        api.llama_context_default_params = original


if __name__ == "__main__":
    main()
