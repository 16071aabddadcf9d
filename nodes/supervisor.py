"""Keeps every wanted rpc-server running, and its SSH tunnel open; records why a server died.

A server serves one client at a time, so health is judged without talking RPC
to a server in use: its process must be alive on the laptop (over SSH) and, in
tunnel mode, its OpenSSH forward alive on the head. The handshake is made only
right after a start, before anyone else connects.
"""

import logging
import socket
import time
from datetime import timedelta

from django.utils import timezone

from nodes import rpc, rpcserver, ssh
from nodes.models import NodeStatus, RpcServer, ServerStatus

log = logging.getLogger(__name__)
MAX_BACKOFF_S = 60


def free_port(preferred: int | None = None) -> int:
    for port in ([preferred] if preferred else []) + [0]:
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
                return sock.getsockname()[1]
            except OSError:
                continue
    raise RuntimeError("no free local port")


def handshake(endpoint: str, within: float = 10.0) -> rpc.Hello:
    """The RPC handshake with a server that has just started and may not listen yet."""
    host, port = endpoint.rsplit(":", 1)
    deadline = time.monotonic() + within
    while True:
        try:
            return rpc.hello(host, int(port), timeout=5)
        except rpc.RpcError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


class Supervisor:
    def __init__(self) -> None:
        self.forwards: dict[int, ssh.Forward] = {}

    def tick(self) -> None:
        servers = list(RpcServer.objects.select_related("node"))
        for server in servers:
            try:
                self.keep_running(server) if server.wanted else self.keep_stopped(server)
            except ssh.HostKeyMismatch as exc:
                server.node.refuse_host_key(exc.presented)
                self.update(server, status=ServerStatus.FAILED, last_death=str(exc))
            except (ssh.SSHError, rpcserver.RpcServerError, rpc.RpcError) as exc:
                self.failed(server, str(exc))
        for gone in set(self.forwards) - {server.pk for server in servers}:
            self.forwards.pop(gone).close()

    def close(self) -> None:
        for forward in self.forwards.values():
            forward.close()
        self.forwards.clear()

    def keep_running(self, server: RpcServer) -> None:
        if server.next_try_at and timezone.now() < server.next_try_at:
            return
        node, target = server.node, server.node.ssh_target()
        if server.restart_requested:
            rpcserver.stop(target, node.install_dir, server.port)
            self.update(server, restart_requested=False, status=ServerStatus.STARTING, pid=None)
        state = rpcserver.state(target, node.install_dir, server.port)
        tunnel_ok = server.direct or self.forward_alive(server)
        if state.running and tunnel_ok and server.status == ServerStatus.RUNNING:
            return
        if not state.running:
            if server.status in (ServerStatus.RUNNING, ServerStatus.STARTING) and server.pid:
                self.record_death(server, state.log_tail)
            bind = node.host if server.direct else "127.0.0.1"
            server.pid = rpcserver.start(target, node.install_dir, server.port, bind=bind)
        if not server.direct:
            self.open_forward(server)
        hello = handshake(server.endpoint) if not state.running else None
        self.update(server, status=ServerStatus.RUNNING, pid=server.pid or state.pid, failures=0, next_try_at=None,
                    protocol=hello.version if hello else server.protocol,
                    free_memory=hello.free_memory if hello else server.free_memory,
                    started_at=timezone.now() if hello else server.started_at)
        if node.status != NodeStatus.READY:
            node.set_status(NodeStatus.READY)

    def keep_stopped(self, server: RpcServer) -> None:
        if server.status == ServerStatus.STOPPED:
            return
        rpcserver.stop(server.node.ssh_target(), server.node.install_dir, server.port)
        forward = self.forwards.pop(server.pk, None)
        if forward:
            forward.close()
        self.update(server, status=ServerStatus.STOPPED, pid=None, local_port=None)

    def forward_alive(self, server: RpcServer) -> bool:
        forward = self.forwards.get(server.pk)
        return forward is not None and forward.alive() and forward.local_port == server.local_port

    def open_forward(self, server: RpcServer) -> None:
        if self.forward_alive(server):
            return
        old = self.forwards.pop(server.pk, None)
        if old:
            old.close()
        port = free_port(server.local_port)
        self.forwards[server.pk] = ssh.forward(server.node.ssh_target(), server.port, port)
        server.local_port = port
        self.update(server, local_port=port)

    def record_death(self, server: RpcServer, log_tail: str) -> None:
        reason = rpcserver.why_it_ended(log_tail)
        log.warning("%s died: %s", server, reason)
        self.update(server, status=ServerStatus.RESTARTING, restarts=server.restarts + 1,
                    last_death=f"{reason}\n\n{log_tail}".strip(), last_death_at=timezone.now())

    def failed(self, server: RpcServer, why: str) -> None:
        failures = server.failures + 1
        wait = min(2 ** failures, MAX_BACKOFF_S)
        log.warning("%s: %s (next try in %d s)", server, why, wait)
        self.update(server, status=ServerStatus.FAILED, failures=failures, last_death=why,
                    next_try_at=timezone.now() + timedelta(seconds=wait))

    @staticmethod
    def update(server: RpcServer, **fields) -> None:
        for name, value in fields.items():
            setattr(server, name, value)
        server.save(update_fields=list(fields))
