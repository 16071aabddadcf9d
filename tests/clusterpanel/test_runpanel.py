"""`make run`'s last step: the whole panel in the foreground, and Ctrl-C stops all of it."""

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import requests
from django.conf import settings

from clusterpanel.kit.procs import is_running
from clusterpanel.run.redis_server import port_is_free
from tests.conftest import free_port, wait_for_port
from tests.services import slotted


def children_of(pid: int) -> set[int]:
    found, todo = set(), [pid]
    while todo:
        for child in direct_children(todo.pop()):
            found.add(child)
            todo.append(child)
    return found


def direct_children(pid: int) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(proc.name))
            except (FileNotFoundError, ProcessLookupError, IndexError):
                pass
    return found


def still_running(pids: set[int], within: float) -> list[int]:
    """Those of `pids` still running after waiting up to `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        alive = [pid for pid in pids if is_running(pid)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


def start_panel(tmp_path: Path, port: int, **env: str) -> subprocess.Popen:
    """runpanel in a session of its own, its output in tmp_path/panel.log (a pipe could fill up)."""
    # Not PYTHONUNBUFFERED either: a user's terminal does not set it (this machine does).
    environment = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL", "PYTHONUNBUFFERED")}
    environment.update(DATA_DIR=str(tmp_path), ADMIN_PASSWORD="first-admin-pass", CELERY_CONCURRENCY="1",
                       **{"DEMO": "0", **env})
    log = open(tmp_path / "panel.log", "a")
    process = subprocess.Popen([sys.executable, "manage.py", "runpanel", "--port", str(port)],
                               cwd=settings.BASE_DIR, env=environment, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    log.close()
    process.log = tmp_path / "panel.log"
    process.log_start = process.log.stat().st_size
    return process


def output_of(process: subprocess.Popen) -> str:
    return process.log.read_text()[process.log_start:]


def finish(process: subprocess.Popen) -> str:
    """Its output once it exits by itself; Ctrl-C to its whole group if it does not."""
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        stop_panel(process)
        raise AssertionError(f"runpanel kept running when it should have stopped:\n{output_of(process)}") from None
    return output_of(process)


def stop_panel(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    process.wait(timeout=60)


def read_until(process: subprocess.Popen, pattern: str, timeout: float = 180) -> str:
    """Its output once `pattern` shows; a first start on a busy machine took over a minute to print its banner
    (Django, migrations, Redis, Celery, the web server)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen = output_of(process)
        if re.search(pattern, seen):
            return seen
        if process.poll() is not None:
            break
        time.sleep(0.1)
    raise AssertionError(f"did not see {pattern!r} in:\n{output_of(process)}")


def test_it_starts_everything_ctrl_c_leaves_nothing_behind_and_a_second_start_keeps_the_password_hidden(tmp_path):
    port = free_port()
    panel = start_panel(tmp_path, port)
    try:
        banner = read_until(panel, r"worker\.1.*ready")
        assert f"http://127.0.0.1:{port}/" in banner
        assert "'first-admin-pass'" in banner, "the first admin's password is shown once"
        redis_port = int(re.search(r"Redis: redis://127\.0\.0\.1:(\d+)", banner).group(1))
        wait_for_port(port)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=10) as page:
            assert page.status == 200
        processes = children_of(panel.pid)
        assert len(processes) >= 4, "redis, web and worker, and the workers' pool"

        # A crashed process is started again, and the rest of the panel goes on (honcho stopped them all).
        worker = next(pid for pid in direct_children(panel.pid)
                      if b"worker" in Path(f"/proc/{pid}/cmdline").read_bytes())
        os.kill(worker, signal.SIGKILL)
        restarted = read_until(panel, r"worker\.1 stopped \(killed by SIGKILL\)[^\n]*\n(.*\n)*.*worker\.1.*ready")
        assert re.search(r"worker\.1 stopped \(killed by SIGKILL\) after \d+ s; starting it again in 1 s", restarted)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=10) as page:
            assert page.status == 200
        processes |= children_of(panel.pid)
    finally:
        stop_panel(panel)
    assert not still_running(processes, within=10)
    assert port_is_free(port) and port_is_free(redis_port)
    assert not (tmp_path / "run" / "redis.url").exists()

    # Started again in the same folder (each fresh folder costs a migrate and a collectstatic): the password is
    # not shown again, and a Ctrl-C during its start-up leaves no Redis behind.
    panel = start_panel(tmp_path, port)
    try:
        banner = read_until(panel, r"Press Ctrl-C")
    finally:
        stop_panel(panel)  # early, while its processes may still be starting
    assert "first-admin-pass" not in banner
    assert port_is_free(int(re.search(r"Redis: redis://127\.0\.0\.1:(\d+)", banner).group(1)))

    # A given Redis that does not answer is named, without a traceback.
    panel = start_panel(tmp_path, free_port(), REDIS_URL=f"redis://127.0.0.1:{free_port()}/0")
    output = finish(panel)
    assert panel.returncode != 0
    assert "Cannot reach the Redis at REDIS_URL" in output
    assert "Traceback" not in output


def test_a_stop_in_the_first_seconds_of_its_start_up_leaves_nothing_behind(tmp_path):
    """Whatever it is doing then (Django's checks, migrations, the CPU check, starting Redis): a service
    manager's SIGTERM ends it within seconds, every process it started with it."""
    panel = start_panel(tmp_path, free_port())
    seen: set[int] = set()
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        seen |= children_of(panel.pid)
        time.sleep(0.05)
    os.killpg(panel.pid, signal.SIGTERM)
    panel.wait(timeout=30)
    output = output_of(panel)
    assert "Traceback" not in output, output
    assert not still_running(seen, within=5), output


def test_it_refuses_a_web_port_already_taken(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        panel = start_panel(tmp_path, taken.getsockname()[1])
        output = finish(panel)
    assert panel.returncode != 0
    assert "already in use" in output and "PANEL_PORT" in output
    assert "Traceback" not in output


def test_it_moves_its_redis_when_the_usual_port_is_taken(tmp_path):
    from clusterpanel.run.redis_server import PREFERRED_PORT, choose_port

    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            taken.bind(("127.0.0.1", PREFERRED_PORT))
        except OSError:
            pytest.fail(f"port {PREFERRED_PORT} is busy before the test; cannot set up the case")
        taken.listen()
        port, note = choose_port()
    assert port != PREFERRED_PORT
    assert f"Port {PREFERRED_PORT} is in use" in note and str(port) in note


def test_make_run_brings_up_a_demo_whose_chat_answers_and_ctrl_c_removes_it(tmp_path, lan_turn):
    port = free_port()
    name, subnet = slotted("tdemo", "10.228.0.0/24")  # never a panel's own demo, nor another run's
    panel = start_panel(tmp_path, port, DEMO="1", DEMO_LAN_NAME=name, DEMO_LAN_SUBNET=subnet)
    try:
        ready = read_until(panel, r"Demo ready.*", timeout=400)
        split = re.findall(rf"({name}-\d) \((\d+) layers\)", ready)
        assert [laptop for laptop, _ in split] == [f"{name}-1", f"{name}-2", f"{name}-3"], ready
        assert all(int(count) > 0 for _, count in split), f"the model is split across all three: {ready}"
        session = requests.Session()
        base = f"http://127.0.0.1:{port}"
        login = session.get(f"{base}/login/", timeout=10)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text).group(1)
        session.post(f"{base}/login/", data={"username": "admin", "password": "first-admin-pass",
                                             "csrfmiddlewaretoken": token}, timeout=10)
        page = session.get(f"{base}/chat/", timeout=10)
        assert "/chat/" in page.url and f"{name}-1" not in page.text
        deployment = re.search(r'<option value="(\d+)"', page.text).group(1)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        sent = session.post(page.url + "send/", json={"text": "Say hello.", "deployment": deployment,
                                                      "params": {"temperature": 0, "max_tokens": 8}},
                            headers={"X-CSRFToken": token, "Referer": page.url}, timeout=10)
        assert sent.status_code == 200, sent.text
        job = sent.json()["job"]
        deadline, answer = time.monotonic() + 180, {}
        while time.monotonic() < deadline and answer.get("status") not in ("succeeded", "failed"):
            time.sleep(0.5)
            answer = session.get(f"{base}/chat/jobs/{job}/", timeout=10).json()
        assert answer["status"] == "succeeded" and answer["output"].strip(), answer
        processes = children_of(panel.pid)
    finally:
        stop_panel(panel)
    assert not still_running(processes, within=15)
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"cp-{name}-" not in namespaces, "the demo laptops are gone"
