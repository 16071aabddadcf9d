"""The README's first command, as a new user types it: `make run` sets up, starts the panel, and Ctrl-C
stops all of it. (`make test` ran the setup with --test just before: this is the path without it.)"""

import os
import re
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

from clusterpanel.run.redis_server import port_is_free
from tests.clusterpanel.test_runpanel import children_of, still_running
from tests.conftest import free_port, wait_for_port

ROOT = Path(__file__).resolve().parents[2]


def make_run(tmp_path: Path, port: int) -> subprocess.Popen:
    """`make run` in a session of its own, as in a terminal; its output in tmp_path/make.log."""
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL", "DJANGO_SETTINGS_MODULE")}
    env.update(DATA_DIR=str(tmp_path / "data"), PANEL_PORT=str(port), DEMO="0", ADMIN_PASSWORD="first-admin-pass",
               CELERY_CONCURRENCY="1")
    with open(tmp_path / "make.log", "w") as log:
        return subprocess.Popen(["make", "run"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)


def wait_for_output(process: subprocess.Popen, log: Path, pattern: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen = log.read_text()
        if re.search(pattern, seen):
            return seen
        if process.poll() is not None:
            break
        time.sleep(0.2)
    raise AssertionError(f"did not see {pattern!r}; `make run` printed:\n{log.read_text()}")


def test_it_sets_up_starts_the_panel_and_ctrl_c_leaves_nothing_behind(tmp_path):
    port, processes, redis_port = free_port(), set(), None
    panel = make_run(tmp_path, port)
    log = tmp_path / "make.log"
    try:
        banner = wait_for_output(panel, log, r"worker\.1.*ready", timeout=600)
        assert "Setup complete" in banner and "setup failed" not in banner
        assert f"http://127.0.0.1:{port}/" in banner and "'first-admin-pass'" in banner
        redis_port = int(re.search(r"Redis: redis://127\.0\.0\.1:(\d+)", banner).group(1))
        wait_for_port(port)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=10) as page:
            assert page.status == 200 and b"password" in page.read().lower()
        processes = children_of(panel.pid)
        names = {Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ") for pid in processes
                 if Path(f"/proc/{pid}").exists()}
        for wanted in (b"clusterpanel.web.webserver", b"celery", b"supervise", b"metrics", b"redis-server"):
            assert any(wanted in name for name in names), f"{wanted!r} is not running under `make run`"
    finally:
        if panel.poll() is None:
            os.killpg(panel.pid, signal.SIGINT)  # Ctrl-C in the terminal: the whole foreground group
        panel.wait(timeout=60)
    assert not still_running(processes, within=15)
    assert port_is_free(port) and redis_port and port_is_free(redis_port)
