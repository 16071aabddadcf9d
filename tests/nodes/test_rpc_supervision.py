"""rpc-servers on laptops, reached through SSH tunnels, kept alive by the supervisor."""

import time

import pytest
from django.test import Client

from clusterpanel.accounts.models import Role, User
from models_app.llamacpp import libllama
from nodes.models import Connection, RpcServer, ServerStatus
from nodes.remote import ssh
from nodes.servers import handshake as rpc
from nodes.servers import rpcserver
from tests.conftest import wait_until

RESTART_WITHIN_S = 10  # documented in README: a dead server is back within 10 s


def running(server: RpcServer) -> RpcServer | None:
    server.refresh_from_db()
    return server if server.status == ServerStatus.RUNNING and server.endpoint else None


def test_it_runs_a_server_on_each_of_three_laptops_behind_ssh_tunnels(nodes, supervisor, runtime_bundle):
    servers = [RpcServer.objects.create(node=node, port=50100) for node in nodes]
    for server in servers:
        wait_until(lambda s=server: running(s), 60, f"{server} running")
        assert server.endpoint.startswith("127.0.0.1:")
        assert server.protocol == runtime_bundle.rpc_protocol
        assert server.free_memory > 0
        assert rpc.hello("127.0.0.1", server.local_port).devices == 1
        with pytest.raises(rpc.RpcError):
            rpc.hello(server.node.host, server.port, timeout=2)  # not open to the LAN
    memory = libllama.rpc_device_memory(servers[0].endpoint)
    assert memory["total"] > 0, "the head's own RPC client works through the tunnel"


def test_it_restarts_a_killed_server_and_records_why_it_died(nodes, supervisor):
    server = RpcServer.objects.create(node=nodes[0], port=50101)
    wait_until(lambda: running(server), 60, "first start")
    first_pid = server.pid
    ssh.sh(nodes[0].ssh_target(), 'kill -9 "$1"', str(first_pid))
    killed_at = time.monotonic()

    def restarted():
        server.refresh_from_db()
        return server.restarts == 1 and server.status == ServerStatus.RUNNING and server.pid != first_pid

    wait_until(restarted, RESTART_WITHIN_S, "restart")
    assert time.monotonic() - killed_at < RESTART_WITHIN_S
    assert "killed (signal 9)" in server.last_death
    admin = User.objects.create_user("admin2", password="pw-for-the-test", role=Role.ADMIN)
    client = Client()
    client.force_login(admin)
    log = client.get(f"/nodes/{nodes[0].name}/rpc-server/50101/log/")
    assert b"Starting RPC server" in log.content
    assert rpcserver.state(nodes[0].ssh_target(), nodes[0].install_dir, 50101).pid == server.pid
    assert rpc.hello("127.0.0.1", server.local_port).devices == 1


def test_it_stops_a_server_and_closes_its_tunnel(nodes, supervisor):
    server = RpcServer.objects.create(node=nodes[1], port=50102)
    wait_until(lambda: running(server), 60, "start")
    local_port = server.local_port
    RpcServer.objects.filter(pk=server.pk).update(wanted=False)

    def stopped():
        server.refresh_from_db()
        return server.status == ServerStatus.STOPPED

    wait_until(stopped, 20, "stop")
    assert not rpcserver.state(nodes[1].ssh_target(), nodes[1].install_dir, 50102).running
    with pytest.raises(rpc.RpcError):
        rpc.hello("127.0.0.1", local_port, timeout=2)


def test_it_binds_to_the_lan_address_in_direct_mode(nodes, supervisor):
    node = nodes[2]
    node.connection = Connection.DIRECT
    node.save()
    server = RpcServer.objects.create(node=node, port=50103)
    wait_until(lambda: running(server), 60, "start")
    assert server.endpoint == f"{node.host}:50103"
    assert server.local_port is None
    assert rpc.hello(node.host, 50103).devices == 1


def test_it_restarts_a_server_on_request_without_counting_a_death(nodes, supervisor):
    server = RpcServer.objects.create(node=nodes[2], port=50104)
    wait_until(lambda: running(server), 60, "start")
    first_pid = server.pid
    RpcServer.objects.filter(pk=server.pk).update(restart_requested=True)

    def restarted():
        server.refresh_from_db()
        return not server.restart_requested and server.status == ServerStatus.RUNNING and server.pid != first_pid

    wait_until(restarted, RESTART_WITHIN_S, "restart on request")
    assert server.restarts == 0 and server.last_death == ""


def server_environment(node, pid: int) -> dict[str, str]:
    raw = ssh.sh(node.ssh_target(), 'tr "\\0" "\\n" < "/proc/$1/environ"', str(pid)).stdout
    return dict(line.split("=", 1) for line in raw.splitlines() if "=" in line)


def test_it_starts_a_server_with_the_spin_count_for_its_openmp_threads(nodes, settings):
    """libgomp's own spin keeps every core of a laptop busy between tokens (bench/omp_spin.py)."""
    node = nodes[0]
    pid = rpcserver.start(node.ssh_target(), node.install_dir, 50130).pid
    assert server_environment(node, pid)["GOMP_SPINCOUNT"] == str(settings.RPC_SPIN_COUNT)
    settings.RPC_SPIN_COUNT = 0
    pid = rpcserver.start(node.ssh_target(), node.install_dir, 50131).pid
    assert "GOMP_SPINCOUNT" not in server_environment(node, pid), "0 leaves libgomp's default"
