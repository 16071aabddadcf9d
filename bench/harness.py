"""What every benchmark needs, once: a scratch panel database with its own Redis, free ports, processes ended by
id, variants measured in alternating rounds (the machine is shared and noisy: side by side, never one after the
other), and the median/ratio table docs/benchmarks.md quotes. A whole running panel with laptops is
bench/scratch_panel.py, built on this."""

import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_port(port: int, within: float = 20) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"nothing listens on {port}")


def end(process: subprocess.Popen, within: float = 30) -> None:
    """TERM, then KILL if it has not gone within `within` s."""
    process.terminate()
    try:
        process.wait(within)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@dataclass
class Scratch:
    """A scratch data folder, its Redis (replaced when a benchmark restarts it) and Django set up on both."""

    data: Path
    redis: object


@contextmanager
def scratch_django(prefix: str = "bench-", migrate: bool = True) -> Iterator[Scratch]:
    """DATA_DIR in a new folder, the panel's own Redis in it, Django set up in this process and the database
    migrated; the Redis stopped and the folder removed after, whatever happened."""
    data = Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(data, 0o755)  # the simulated laptops' users read the runtime from it
    os.environ.update(DATA_DIR=str(data), DJANGO_SETTINGS_MODULE="clusterpanel.settings")
    sys.path.insert(0, str(ROOT))
    from clusterpanel.run.redis_server import RedisServer

    scratch = Scratch(data, RedisServer.start(data / "redis"))
    os.environ["REDIS_URL"] = scratch.redis.url
    try:
        import django

        django.setup()
        if migrate:
            from django.core.management import call_command

            call_command("migrate", verbosity=0)
        yield scratch
    finally:
        scratch.redis.stop()
        shutil.rmtree(data, ignore_errors=True)


def alternate(rounds: int, variants: dict[str, Callable[[], float]]) -> dict[str, list[float]]:
    """Each variant measured once a round, the order reversed every other round, so drift on a shared machine
    falls on every variant alike. Each callable returns its measure (seconds, tokens/s, ...)."""
    found: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for round_ in range(rounds):
        for name in names if round_ % 2 == 0 else reversed(names):
            found[name].append(variants[name]())
    return found


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table, as docs/benchmarks.md quotes it."""
    cells = [[str(cell) for cell in row] for row in rows]
    widths = [max(len(str(h)), *(len(row[i]) for row in cells)) for i, h in enumerate(headers)]
    line = lambda values: "| " + " | ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)) + " |"  # noqa: E731
    return "\n".join([line([str(h) for h in headers]), "|" + "|".join("-" * (w + 2) for w in widths) + "|",
                      *(line(row) for row in cells)])


def ratio_table(found: dict[str, list[float]], baseline: str, unit: str = "s", digits: int = 3) -> str:
    """Median, min and max of each variant and its median's ratio to the baseline's."""
    base = statistics.median(found[baseline])
    rows = [(name, f"{statistics.median(values):.{digits}f} {unit}", f"{min(values):.{digits}f}",
             f"{max(values):.{digits}f}", f"{statistics.median(values) / base:.2f}" if base else "-")
            for name, values in found.items()]
    return table(("variant", "median", "min", "max", f"× {baseline}"), rows)
