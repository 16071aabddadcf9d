"""Which of llama.cpp's CPU kernels run on this machine, found by running them in throwaway processes.

A CPU can report instructions it cannot run: a Xeon in a VM that reports `amx_tile amx_int8 amx_bf16` stops
with SIGILL on `tilezero` in ggml's AMX kernels for any prompt longer than one token (so short tests miss it),
and asking the kernel for the tile permission does not help. Those kernels are reached only through llama.cpp's
extra buffer types, into which weights are repacked as the model loads; with `use_extra_bufts = False` every
weight stays in a plain CPU buffer, which every CPU variant computes, and the answers are the same.

So before the first model loads here, a child loads the bundled model as the panel's processes do and reads a
multi-token prompt; if it dies of a fault of its own code (SIGILL, SIGSEGV, SIGBUS, SIGFPE), every llama.cpp
process the panel starts on this machine (engines, Verify's reference, calibration, speed tests) loads without
repacking, and a second child checks that this runs. The verdict is kept in the data folder, per CPU and
llama.cpp build, and shown on the System page.

Laptops need no such trial: `ggml-rpc-server` keeps every tensor in its device's default buffer type
(ggml-rpc.cpp), so the extra buffer types, and the AMX kernels with them, are never used there.
"""

import contextlib
import fcntl
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from models_app.llamacpp import libllama

ROOT = Path(__file__).resolve().parents[2]
TRIAL_S = 120
TRAPS = {signal.SIGILL, signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE}
FILE = "llama-cpu-check.json"
# Long enough that ggml computes it as one matrix product through the repacked weights, as a real prompt does.
TRIAL_PROMPT = "The lighthouse keeper climbed the stairs, trimmed the wick and watched the ships pass the rocks."


@dataclass(frozen=True)
class Verdict:
    extra_buffers: bool  # whether models here load with llama.cpp's extra (repacking) buffer types
    runs: bool  # whether llama.cpp ran here at all
    detail: str  # in plain words, for the System page
    key: str = ""
    checked_at: float = 0.0


def cpu_flags() -> set[str]:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return set(line.partition(":")[2].split())
    return set()


def reports_amx(flags: set[str] | None = None) -> bool:
    return any(flag.startswith("amx") for flag in (cpu_flags() if flags is None else flags))


def death_in_words(returncode: int) -> str | None:
    """What a llama.cpp process that ended on a signal met, in words; None when it exited by itself."""
    if returncode >= 0:
        return None
    number = -returncode
    if number == signal.SIGILL:
        where = (" in llama.cpp's AMX kernels: this CPU reports AMX but cannot run it (as in some virtual machines)"
                 if reports_amx() else ": this CPU cannot run an instruction llama.cpp's kernels use")
        return f"stopped on an illegal instruction (SIGILL){where}"
    words = {signal.SIGSEGV: "crashed on a memory fault (SIGSEGV)", signal.SIGBUS: "crashed on a bus error (SIGBUS)",
             signal.SIGFPE: "stopped on an arithmetic fault (SIGFPE)", signal.SIGABRT: "aborted (SIGABRT)",
             signal.SIGKILL: "was killed (SIGKILL), perhaps by the kernel for want of memory",
             signal.SIGTERM: "was stopped (SIGTERM)"}
    with contextlib.suppress(ValueError):
        return words.get(signal.Signals(number), f"ended on signal {signal.Signals(number).name}")
    return f"ended on signal {number}"


def data_dir() -> Path:
    from django.conf import settings

    if settings.configured:
        return Path(settings.DATA_DIR)
    return Path(os.environ.get("DATA_DIR", ROOT / "var")).resolve()  # as settings.py would have it


def build_key() -> str:
    """This CPU's flags and the llama.cpp build that runs here: a verdict holds only while both stay."""
    spec = importlib.util.find_spec("llama_cpp")
    libs = Path(spec.origin).parent / "lib" if spec and spec.origin else Path()
    stats = sorted((p.name, p.stat().st_size, int(p.stat().st_mtime)) for p in libs.glob("libggml-cpu*"))
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        stats.append(("llama_cpp_python", importlib.metadata.version("llama_cpp_python")))
    text = json.dumps([sorted(cpu_flags()), stats])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def known() -> Verdict | None:
    """The verdict kept for this CPU and build, without running anything (for pages)."""
    try:
        found = Verdict(**json.loads((data_dir() / FILE).read_text()))
    except (OSError, ValueError, TypeError):
        return None
    return found if found.key == build_key() else None


def verdict() -> Verdict:
    """The kept verdict, or a new one from the trials (one process at a time runs them; the others wait). Only a
    conclusive one is kept: a trial killed from outside (for memory, a stop) or that could not run is tried again
    by the next process that loads a model."""
    found = known()
    if found is not None:
        return found
    folder = data_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{FILE}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = known()
        if found is None:
            found, conclusive = check()
            if conclusive:
                staging = folder / f"{FILE}.{os.getpid()}"
                staging.write_text(json.dumps(asdict(found)))
                staging.replace(folder / FILE)
    return found


def trapped(returncode: int) -> bool:
    """Died on a fault of its own code on this CPU, not of a signal sent from outside (SIGKILL, SIGTERM)."""
    return -returncode in TRAPS


def check() -> tuple[Verdict, bool]:
    """The verdict, and whether it is conclusive."""
    key, now = build_key(), time.time()
    repacked = trial(extra_buffers=True)
    if repacked == 0:
        return Verdict(True, True, "llama.cpp's CPU kernels, weight repacking included, ran in a trial.", key,
                       now), True
    if not trapped(repacked):  # nothing points at repacking (no model, no time, killed from outside)
        why = death_in_words(repacked) or f"failed (exit {repacked})"
        return Verdict(True, True, f"The trial {why}; llama.cpp's defaults are kept until the next one.", key,
                       now), False
    why = death_in_words(repacked)
    plain = trial(extra_buffers=False)
    if trapped(plain):  # said only of a CPU that traps twice: a one-off crash would keep the panel from every model
        plain = trial(extra_buffers=False)
    if trapped(plain):
        return Verdict(False, False, f"llama.cpp cannot run on this machine: with weight repacking it {why}; "
                                     f"without, it {death_in_words(plain)}.", key, now), True
    return Verdict(False, True, f"With weight repacking llama.cpp {why}. Models on this machine load without it: "
                                "the same answers, but models llama.cpp would repack (Q4_0, for one) read prompts "
                                "at about 60 % of the speed.", key, now), plain == 0


def trial(extra_buffers: bool) -> int:
    """The exit code of a child that loads the bundled model and reads a prompt (negative: the signal)."""
    argv = [sys.executable, "-m", "models_app.llamacpp.cpucheck", "--trial", "on" if extra_buffers else "off"]
    try:
        return subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=TRIAL_S).returncode
    except subprocess.TimeoutExpired:
        return 124


@contextlib.contextmanager
def loading(progress: Callable[[float], None] | None = None) -> Iterator[None]:
    """Models loaded meanwhile use only the kernels that run here, reporting their progress to `progress`."""
    with libllama.model_params(extra_buffers=verdict().extra_buffers, progress=progress):
        yield


def run_trial(extra_buffers: bool) -> None:
    from llama_cpp import Llama

    from models_app.library.bundled import bundled_model_path

    with libllama.model_params(extra_buffers=extra_buffers):
        llm = Llama(model_path=str(bundled_model_path()), n_ctx=256, verbose=False)
    llm(TRIAL_PROMPT, max_tokens=2, temperature=0.0)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--trial"] and sys.argv[2:3] in (["on"], ["off"]):
        run_trial(sys.argv[2] == "on")
        # The kernels ran; what the trial asks ends here. Freeing the model as the interpreter shuts down can
        # crash in llama-cpp-python's finalizers, and a SIGSEGV there would read as a CPU that cannot run them.
        sys.stdout.flush()
        os._exit(0)
    else:
        sys.exit("usage: python -m models_app.llamacpp.cpucheck --trial on|off (manage.py cpucheck shows the verdict)")
