"""The two doors a GGUF file comes in by, driven as a lab admin would, with what each cost.

`manage.py addmodel` runs as a real process: its exit status, its output and its peak memory, the header
reader's child included (peak_of.py).
The browser's upload runs in this process through the chunked protocol; its cost is this process's peak
memory (reset before, read after) and the header reader's own report of its child's peak.
"""

import io
import logging
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.core.management import CommandError, call_command

from tests.conftest import ROOT, child_env
from tests.models_app.uploading import send_all, start

PEAK_OF = Path(__file__).with_name("peak_of.py")
MIB = 1 << 20
MEMORY_BUDGET = 100 * MIB  # what validating one header may cost, whatever the header claims
READ_BUDGET_S = 2.0  # what reading one header may take
UPLOAD_BUDGET_S = 4.0  # a whole upload door of a file of a few MB, both reads of its header included
# CPU seconds over a command refusing a non-GGUF file (the command's wall clock stretches by seconds on a shared
# machine); each read's own time is held to READ_BUDGET_S where it can be seen (the upload door, the fuzz test).
COMMAND_BUDGET_S = 6.0


@dataclass
class Door:
    refused: bool
    message: str
    seconds: float  # the wall clock in this process; the CPU time of the addmodel command and its children
    peak_bytes: int  # growth of the door's process: this one's for the upload, the whole command's for addmodel
    reads: list = field(default_factory=list)  # (seconds, peak MiB) of each header read the door made


def addmodel(path: Path, name: str = "") -> Door:
    argv = [sys.executable, str(PEAK_OF), "manage.py", "addmodel", str(path), *(["--name", name] if name else [])]
    with tempfile.TemporaryDirectory() as folder:
        out, err, peak = (Path(folder) / part for part in ("out", "err", "peak"))
        with out.open("wb") as stdout, err.open("wb") as stderr:
            done = subprocess.run(argv, cwd=ROOT, env={**child_env(), "PEAK_FILE": str(peak)}, stdout=stdout,
                                  stderr=stderr, timeout=300, check=False)
        said = (err if done.returncode else out).read_text(errors="replace")
        peak_bytes, cpu_seconds = peak.read_text().split()
        return Door(done.returncode != 0, said, float(cpu_seconds), int(peak_bytes))


def addmodel_here(path: Path, name: str = "by-command") -> Door:
    """addmodel in this process, where a start-up per file would cost more than the file: a refusal is its
    CommandError; anything else raised is a crash, and fails the test with its traceback."""
    with measured() as cost:
        try:
            call_command("addmodel", str(path), "--name", name, stdout=io.StringIO())
            refused, message = False, ""
        except CommandError as exc:
            refused, message = True, f"CommandError: {exc}"
    return Door(refused, message, cost.seconds, cost.peak_bytes, cost.reads)


def upload(client, path: Path, chunk: int, name: str = "") -> Door:
    data = path.read_bytes()
    with measured() as cost:
        answer = start(client, path.name, len(data), model_name=name)
        if answer.status_code in (200, 201):
            answer = send_all(client, answer.json()["url"], data, chunk)
    refused = answer.status_code != 201
    message = answer.json().get("error", "") if answer.get("Content-Type") == "application/json" else answer.content
    return Door(refused, str(message), cost.seconds, cost.peak_bytes, cost.reads)


class ReadLog(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.reads = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg.startswith("read the GGUF header"):
            self.reads.append(record.args[1:])


@dataclass
class Cost:
    seconds: float = 0.0
    peak_bytes: int = 0
    reads: list = field(default_factory=list)


@contextmanager
def measured():
    """Time, this process's peak memory growth, and the header reads' own reports, over the block."""
    cost, handler = Cost(), ReadLog()
    logger = logging.getLogger("models_app.gguf.reader")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.DEBUG)
    Path("/proc/self/clear_refs").write_text("5")  # resets this process's peak RSS (VmHWM) to its RSS
    before = rss("VmRSS")
    started = time.monotonic()
    try:
        yield cost
    finally:
        cost.seconds = time.monotonic() - started
        cost.peak_bytes = rss("VmHWM") - before
        cost.reads = handler.reads
        logger.removeHandler(handler)
        logger.setLevel(level)


def rss(line: str) -> int:
    for row in Path("/proc/self/status").read_text().splitlines():
        if row.startswith(line + ":"):
            return int(row.split()[1]) * 1024
    raise AssertionError(f"no {line} in /proc/self/status")


def empty_model_folders() -> None:
    """No part files or models left by earlier tests in this run's data folder."""
    for folder in (settings.UPLOAD_DIR, settings.MODELS_DIR):
        shutil.rmtree(Path(folder), ignore_errors=True)


def assert_one_sentence(door: Door) -> None:
    """A refusal is one line of words: no traceback, no HTML page."""
    text = door.message.strip()
    assert text and "\n" not in text, f"one line, not:\n{text[:3000]}"
    assert "Traceback" not in text and "<html" not in text.lower(), text[:3000]
    assert "Error: " not in text.removeprefix("CommandError: "), f"words, not a Python exception: {text[:3000]}"
