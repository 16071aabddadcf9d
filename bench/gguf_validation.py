"""What does validating a GGUF file cost, with the gguf package's reader (before issue 12) and with llama.cpp's
bounded reader in a child process (models_app/gguf/reader.py), on real headers and on hostile ones?

Each validation (`read_metadata`) runs in a fresh process, which reports its wall time and its peak memory:
the growth of its own peak over what it held before reading, plus, for the new reader, the peak of the
reader's child. Old and new alternate, --rounds rounds; medians. The old reader is not run on files it
would need gigabytes for (the issue measured ~750 bytes per array element).

    .venv/bin/python bench/gguf_validation.py [--rounds 3]
"""

import argparse
import json
import logging
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
MIB = 1 << 20
MEMORY_LIMIT = 256 << 20  # models_app/gguf/reader.py, not imported here: each reading starts from nothing


def hostile_files(folder: Path) -> list[tuple[str, Path, bool]]:
    """(what, path, run the old reader too)."""
    from models_app.library.bundled import bundled_model_path
    from tests.security.gguf_files import T, real_header_model, with_big_array, with_empty_strings, write_model

    real = folder / "real-header.gguf"
    real.write_bytes(real_header_model())
    return [
        ("bundled SmolLM2 (98 MB, real 1.8 MB header)", bundled_model_path(), True),
        ("its header over tiny tensors (1.8 MB)", real, True),
        ("2,000,000 uint8 in one array (2 MB)", with_big_array(folder / "array2m.gguf", 2_000_001), True),
        ("16,777,216 layers claimed (2.3 KB)",
         write_model(folder / "layers.gguf", values={"{arch}.block_count": (1 << 24, T.UINT32)}), True),
        ("block_count 2^40", write_model(folder / "bc40.gguf", values={"{arch}.block_count": (1 << 40, T.UINT64)}),
         True),
        ("block_count as a float", write_model(folder / "bcf.gguf", values={"{arch}.block_count": (4.0, T.FLOAT32)}),
         True),
        ("context_length 2^64-1",
         write_model(folder / "ctx.gguf", values={"{arch}.context_length": ((1 << 64) - 1, T.UINT64)}), True),
        ("20,000,000 uint8 in one array (20 MB)", with_big_array(folder / "array20m.gguf", 20_000_001), False),
        ("24 MiB of empty strings in one array", with_empty_strings(folder / "strings24.gguf", 24), False),
        ("31 MiB of empty strings in one array", with_empty_strings(folder / "strings31.gguf", 31), False),
        ("40 MiB of empty strings (past the 32 MiB read)", with_empty_strings(folder / "strings40.gguf", 40), False),
    ]


def shorter(said: str, length: int = 70) -> str:
    return said if len(said) <= length else said[:length - 1] + "…"


def measure_one(which: str, path: str) -> dict:
    """In the fresh process: validate once, report seconds, peak growth and the outcome."""
    if which == "old":
        from tests.security.gguf_reference import GGUFError, read_metadata
    else:
        from models_app.gguf.meta import GGUFError, read_metadata
    child_peaks = []
    logging.getLogger("models_app.gguf.reader").addHandler(ChildPeak(child_peaks))
    logging.getLogger("models_app.gguf.reader").setLevel(logging.DEBUG)
    Path("/proc/self/clear_refs").write_text("5")
    before = status_kb("VmRSS")
    started = time.perf_counter()
    try:
        outcome = f"added, {read_metadata(Path(path)).n_layer} layers"
    except GGUFError as exc:
        outcome = f"refused: {shorter(str(exc).removeprefix(Path(path).name + ' '))}"
    except Exception as exc:  # the old reader's crashes are part of what is measured
        outcome = f"crashed: {type(exc).__name__}"
    seconds = time.perf_counter() - started
    own = (status_kb("VmHWM") - before) * 1024
    ended_by_limit = which == "new" and not child_peaks and "limits" in outcome  # its child was killed
    return {"seconds": seconds, "peak": own + sum(child_peaks), "outcome": outcome, "killed": ended_by_limit}


class ChildPeak(logging.Handler):
    def __init__(self, peaks: list) -> None:
        super().__init__(logging.DEBUG)
        self.peaks = peaks

    def emit(self, record: logging.LogRecord) -> None:
        self.peaks.append(int(record.args[2] * MIB))


def status_kb(line: str) -> int:
    rows = Path("/proc/self/status").read_text().splitlines()
    return next(int(row.split()[1]) for row in rows if row.startswith(line + ":"))


def run_one(which: str, path: Path) -> dict:
    done = subprocess.run([sys.executable, __file__, "--one", which, str(path)], capture_output=True, text=True,
                          cwd=ROOT, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def row(what: str, old: list[dict], new: list[dict]) -> str:
    new_s, new_mib = median(new, "seconds"), median(new, "peak") / MIB
    new_memory = f"≤ {MEMORY_LIMIT >> 20} (killed)" if new[0]["killed"] else f"{new_mib:.0f}"
    cells = [what, "not run", "not run", "—", f"{new_s:.2f}", new_memory, new[0]["outcome"], "—", "—"]
    if old:
        old_s, old_mib = median(old, "seconds"), median(old, "peak") / MIB
        cells[1:4] = f"{old_s:.2f}", f"{old_mib:.0f}", old[0]["outcome"]
        if not old[0]["outcome"].startswith("crashed") and old_s >= 0.01:  # else it crashes later, saving it
            cells[7:9] = f"{old_s / new_s:.1f}×", f"{old_mib / max(new_mib, 1):.1f}×"
    return "| " + " | ".join(cells) + " |"


def median(runs: list[dict], key: str) -> float:
    return statistics.median(run[key] for run in runs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--one", nargs=2, metavar=("WHICH", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure_one(*args.one)))
        return
    with tempfile.TemporaryDirectory() as folder:
        files = hostile_files(Path(folder))
        print(f"read_metadata in a fresh process per file and reader, {args.rounds} alternating rounds, medians; "
              f"memory is the growth of the process's peak, plus the reader child's peak for the new reader\n")
        print("| file | old s | old MiB | old outcome | new s | new MiB | new outcome | time ratio | memory ratio |")
        print("|---|---:|---:|---|---:|---:|---|---:|---:|")
        for what, path, with_old in files:
            old, new = [], []
            for _ in range(args.rounds):
                if with_old:
                    old.append(run_one("old", path))
                new.append(run_one("new", path))
            print(row(what, old, new), flush=True)


if __name__ == "__main__":
    main()
