"""The supervisor outlives any failure in a round: it logs it, keeps every other server running, and only
SIGTERM ends it (under `make run` its exit would end the whole panel)."""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nodes.models import RpcServer, ServerStatus
from nodes.remote import ssh
from nodes.servers import rpcserver
from tests.conftest import ROOT, child_env, stop, wait_until
from tests.nodes.trouble import locked_database

RESTART_WITHIN_S = 10


@pytest.fixture
def supervisor(tmp_path, transactional_db):
    """`manage.py supervise` with its log in a file."""
    log = tmp_path / "supervise.log"
    with open(log, "w") as out:
        process = subprocess.Popen([sys.executable, "manage.py", "supervise", "--interval", "0.5"], cwd=ROOT,
                                   env=child_env(), stdout=out, stderr=subprocess.STDOUT)
    yield process, log
    stop(process)


def running(server: RpcServer) -> bool:
    server.refresh_from_db()
    return server.status == ServerStatus.RUNNING and bool(server.endpoint)


def failed(server: RpcServer) -> bool:
    server.refresh_from_db()
    return server.status == ServerStatus.FAILED


def kill_and_wait_for_restart(server: RpcServer) -> float:
    """Kill the server on its laptop; seconds until the supervisor had it running again."""
    first_pid, restarts = server.pid, server.restarts
    ssh.sh(server.node.ssh_target(), 'kill -9 "$1"', str(first_pid))
    killed_at = time.monotonic()
    wait_until(lambda: running(server) and server.restarts > restarts and server.pid != first_pid,
               RESTART_WITHIN_S + 20, f"{server} restarted")
    return time.monotonic() - killed_at


def garbage_pidfile(node, port: int) -> None:
    """A pidfile holding a word, not a number. `/proc/self` exists, so the status check took it for a running
    server and the supervisor died reading its pid."""
    ssh.sh(node.ssh_target(), 'mkdir -p "$1" && echo self > "$1/pid"', rpcserver.folder(node.install_dir, port))


def unwritable_folder(node, laptop, port: int) -> Path:
    """The server's folder on the laptop owned by root: its pid is never written, and the supervisor died
    reading "started" (no pid) as one."""
    ssh.sh(node.ssh_target(), 'mkdir -p "$1"', rpcserver.folder(node.install_dir, port))
    path = Path(laptop.home) / ".clusterpanel" / "rpc" / str(port)
    os.chown(path, 0, 0)
    os.chmod(path, 0o555)
    return path


def ends_on_sigterm(process: subprocess.Popen) -> None:
    assert process.poll() is None, "still running: only a deliberate stop ends it"
    process.send_signal(signal.SIGTERM)
    assert process.wait(15) == 0


def test_it_keeps_the_other_servers_running_when_one_laptop_fails_in_a_round(lan, nodes, supervisor):
    process, log = supervisor
    garbage_pidfile(nodes[0], 50150)
    locked = unwritable_folder(nodes[1], lan(3).laptops[1], 50151)
    try:
        servers = [RpcServer.objects.create(node=node, port=port)
                   for node, port in zip(nodes, (50150, 50151, 50152), strict=True)]
        wait_until(lambda: running(servers[0]) and running(servers[2]), 60, "the two good servers running")
        wait_until(lambda: failed(servers[1]), 30, "the server that cannot start marked failed")
        assert "not writable" in servers[1].last_death
        assert kill_and_wait_for_restart(servers[2]) < RESTART_WITHIN_S
    finally:
        shutil.rmtree(locked)
    assert "not writable" in log.read_text(), "the reason is in the log"
    ends_on_sigterm(process)


def test_it_outlives_a_database_locked_past_its_timeout(nodes, supervisor):
    process, log = supervisor
    server = RpcServer.objects.create(node=nodes[2], port=50153)
    wait_until(lambda: running(server), 60, "first start")
    first_pid = server.pid
    with locked_database():
        ssh.sh(nodes[2].ssh_target(), 'kill -9 "$1"', str(first_pid))  # writing down its death waits, then fails
        wait_until(lambda: "database is locked" in log.read_text(), 40, "the supervisor failing to write")
        time.sleep(1)
        assert process.poll() is None, "the failed write did not end the supervisor"
    wait_until(lambda: running(server) and server.pid != first_pid, 30, "the restart once the lock is gone")
    assert server.restarts == 1 and "killed (signal 9)" in server.last_death
    ends_on_sigterm(process)
