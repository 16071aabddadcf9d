"""A real Celery worker started inside a test, for what happens when one starts."""

import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT, child_env, wait_until


def start_worker(log: Path, *argv: str, env: dict | None = None) -> subprocess.Popen:
    """A worker on the test database and Redis, with no message left by earlier tests; returns once it says
    it is ready, which it says after its start-up hooks ran."""
    from clusterpanel.kit.celery import app

    app.control.purge()
    with open(log, "wb") as out:
        worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", "clusterpanel", "worker", "--pool", "solo",
                                   "--loglevel", "INFO", "--without-mingle", "--without-gossip", *argv],
                                  cwd=ROOT, env=env or child_env(), stdout=out, stderr=subprocess.STDOUT)
    wait_until(lambda: b" ready." in log.read_bytes() or worker.poll() is not None, 60, "the worker to be ready")
    assert worker.poll() is None, log.read_text()
    return worker
