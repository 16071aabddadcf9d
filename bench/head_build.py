"""What the head gives up by running the laptops' ggml: its best CPU variant against a build for this very CPU.

`make setup` compiles llama.cpp once (scripts/build_llama.py): the head's libllama runs on the same ggml as the
laptops' bundle, its CPU code picked at run time from the bundle's variants (one per instruction-set level).
Before, the head had a build of its own, compiled for this CPU (`-march=native`), at the cost of compiling ggml
and libllama a second time. This loads the bundled model on the head with each set of libraries, in alternating
rounds, each in a process of its own, and measures reading a 445-token prompt and generating.

    .venv/bin/python bench/head_build.py --against OTHER.whl [--rounds 5] [--tokens 64]

OTHER.whl: a llama-cpp-python wheel built by pip from the same source with `CMAKE_ARGS=-DGGML_RPC=on` (what
the setup built before); its libraries are unpacked into a temporary folder and loaded through
LLAMA_CPP_LIB_PATH, as llama-cpp-python allows.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINES = " ".join(f"Line {i}: the quick brown fox jumps over the lazy dog." for i in range(30))
LONG_PROMPT = f"<|im_start|>user\n{LINES}<|im_end|>\n"
PROMPT = "<|im_start|>user\nWrite a short story about a laptop.<|im_end|>\n<|im_start|>assistant\n"


def unpack_libraries(wheel: Path, folder: Path) -> Path:
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if name.startswith("llama_cpp/lib/") and ".so" in name:
                (folder / Path(name).name).write_bytes(archive.read(name))
    return folder


def once(lib_dir: Path | None, tokens: int) -> dict:
    code = f"""
import json, time
from models_app.llamacpp import cpucheck
from llama_cpp import Llama
from models_app.library.bundled import bundled_model_path
with cpucheck.loading():
    llm = Llama(model_path=str(bundled_model_path()), n_ctx=1024, n_batch=512, verbose=True, seed=1)
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
print(json.dumps({{"prefill": prefill, "decode": decode, "text": out["choices"][0]["text"]}}))
"""
    env = {**os.environ, "LLAMA_CPP_LIB_PATH": str(lib_dir)} if lib_dir else dict(os.environ)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=600,
                            env=env)
    if result.returncode != 0:
        raise SystemExit(f"the run failed:\n{result.stderr[-2000:]}")
    variant = re.search(r"loaded CPU backend from \S*?(libggml-cpu-[\w]+)\.so", result.stderr)
    return {**json.loads(result.stdout.strip().splitlines()[-1]),
            "cpu": variant.group(1) if variant else "linked in (libggml-cpu.so)"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--against", type=Path, required=True, help="the other wheel (see the docstring)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-head-build-") as folder:
        builds = {"installed (the shared build)": None,
                  f"{args.against.name}": unpack_libraries(args.against, Path(folder))}
        found = {label: {"prefill": [], "decode": [], "texts": set()} for label in builds}
        for _ in range(args.rounds):
            for label, lib_dir in builds.items():
                run = once(lib_dir, args.tokens)
                for key in ("prefill", "decode"):
                    found[label][key].append(run[key])
                found[label]["texts"].add(run["text"])
                found[label]["cpu"] = run["cpu"]
    base = found[next(iter(builds))]
    print("| head's libraries | CPU code | prompt tok/s (median, min–max) | ratio | decode tok/s (median, min–max) "
          "| ratio |")
    print("|---|---|---|---|---|---|")
    for label, runs in found.items():
        cells = []
        for key in ("prefill", "decode"):
            median = statistics.median(runs[key])
            cells.append(f"{median:.0f} ({min(runs[key]):.0f}–{max(runs[key]):.0f}) | "
                         f"{median / statistics.median(base[key]):.2f}")
        print(f"| {label} | {runs['cpu']} | {' | '.join(cells)} |")
    texts = set().union(*(runs["texts"] for runs in found.values()))
    print(f"\nGreedy answers: {'the same text from both' if len(texts) == 1 else f'{len(texts)} different texts'}.")


if __name__ == "__main__":
    main()
