"""What a head gives up when llama.cpp's CPU kernels trap and models load without weight repacking.

Where the trial in models_app/llamacpp/cpucheck.py sees the repacked kernels die (AMX on some virtual Xeons), every
model on the head loads with `use_extra_bufts = False`. This loads the bundled model on the head both ways, in
alternating rounds, each in a process of its own, and measures reading a 445-token prompt and generating. The
bundled model is Q4_1, which llama.cpp repacks on few CPUs; a Q4_0 copy of it (requantized with llama.cpp's own
quantizer into a temporary folder) is what the x86 repacking is made for.

    .venv/bin/python bench/repacking.py [--rounds 5] [--tokens 64]
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINES = " ".join(f"Line {i}: the quick brown fox jumps over the lazy dog." for i in range(30))
LONG_PROMPT = f"<|im_start|>user\n{LINES}<|im_end|>\n"
PROMPT = "<|im_start|>user\nWrite a short story about a laptop.<|im_end|>\n<|im_start|>assistant\n"


def q4_0_copy(folder: Path) -> Path:
    import llama_cpp

    from models_app.library.bundled import bundled_model_path

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype, params.allow_requantize = llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0, True
    target = folder / "SmolLM2-135M-Instruct.Q4_0.gguf"
    if llama_cpp.llama_model_quantize(str(bundled_model_path()).encode(), str(target).encode(), params) != 0:
        raise SystemExit("llama.cpp could not requantize the bundled model")
    return target


def once(model: Path, repacked: bool, tokens: int) -> dict:
    code = f"""
import json, time
from models_app.llamacpp import libllama
from llama_cpp import Llama
with libllama.model_params(extra_buffers={repacked!r}):
    llm = Llama(model_path={str(model)!r}, n_ctx=1024, n_batch=512, verbose=True, seed=1)
llm({PROMPT!r}, max_tokens=4, temperature=0.0)
llm.reset()
start = time.perf_counter()
out = llm({LONG_PROMPT!r}, max_tokens=1, temperature=0.0)
prefill = out["usage"]["prompt_tokens"] / (time.perf_counter() - start)
llm.reset()
llm({PROMPT!r}, max_tokens=1, temperature=0.0)
start = time.perf_counter()
out = llm({PROMPT!r}, max_tokens={tokens}, temperature=0.0, stop=[])
decode = out["usage"]["completion_tokens"] / (time.perf_counter() - start)
print(json.dumps({{"prefill": prefill, "decode": decode}}))
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=600)
    if result.returncode != 0:
        raise SystemExit(f"the run failed:\n{result.stderr[-2000:]}")
    buffers = sorted({line.split()[1] for line in result.stderr.splitlines() if "model buffer size" in line})
    return {**json.loads(result.stdout.strip().splitlines()[-1]), "buffers": buffers}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from models_app.library.bundled import bundled_model_path

    with tempfile.TemporaryDirectory(prefix="bench-repacking-") as folder:
        models = {"Q4_1 (bundled)": bundled_model_path(), "Q4_0 (requantized)": q4_0_copy(Path(folder))}
        modes = {"repacked (llama.cpp's default)": True, "plain buffers (the fallback)": False}
        found = {(m, label): {"prefill": [], "decode": [], "buffers": []} for m in models for label in modes}
        for _ in range(args.rounds):
            for (model, label), runs in found.items():
                run = once(models[model], modes[label], args.tokens)
                for key in ("prefill", "decode"):
                    runs[key].append(run[key])
                runs["buffers"] = run["buffers"]
    print("| model | loading | weight buffers | prompt tok/s (median, min–max) | ratio "
          "| decode tok/s (median, min–max) | ratio |")
    print("|---|---|---|---|---|---|---|")
    for (model, label), runs in found.items():
        base = found[(model, next(iter(modes)))]
        cells = []
        for key in ("prefill", "decode"):
            median = statistics.median(runs[key])
            cells.append(f"{median:.0f} ({min(runs[key]):.0f}–{max(runs[key]):.0f}) | "
                         f"{median / statistics.median(base[key]):.2f}")
        print(f"| {model} | {label} | {', '.join(runs['buffers'])} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
