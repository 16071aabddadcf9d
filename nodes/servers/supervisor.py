"""Keeps every wanted rpc-server running, and its SSH tunnel open; records why a server died.

A server serves one client at a time, so health is judged without talking RPC
to a server in use: its process must be alive on the laptop (over SSH) and, in
tunnel mode, its OpenSSH forward alive on the head. The handshake is made only
right after a start, before anyone else connects.

Each laptop's servers are handled by a thread of their own (`LaptopWorker`): a
laptop whose SSH hangs keeps only its own thread waiting, up to the SSH
timeouts (10 s to connect, `rpcserver.quick_s()` for a command), while every
other laptop is still checked each round. A laptop still busy with the last
round is skipped, so a hung one never piles up threads. One server's failure,
whatever it is, is logged and recorded on that server; the others go on.
"""

import logging
import socket
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import timedelta

from django.db import DatabaseError, close_old_connections, connections
from django.utils import timezone

from clusterpanel.kit.broadcast import broadcast
from nodes.models import Node, NodeStatus, RpcServer, ServerStatus
from nodes.remote import ssh
from nodes.servers import handshake as rpc
from nodes.servers import rpcserver

log = logging.getLogger(__name__)
MAX_BACKOFF_S = 60
LAGGING_S = 10  # a laptop busy with one round this long is named in the log
STOP_WAIT_S = 3  # on close, how long to wait for laptops' threads to finish their round


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


class Stopping(Exception):
    """The supervisor closed while a laptop's round was under way: nothing to record."""


class LaptopWorker(threading.Thread):
    """Handles one laptop's servers, one round at a time, in a thread of its own."""

    def __init__(self, name: str, handle: Callable[[RpcServer], None]) -> None:
        super().__init__(name=f"supervise-{name}", daemon=True)
        self.handle = handle
        self.servers: list[RpcServer] = []
        self.busy_since: float | None = None
        self.warned = False
        self.wake = threading.Event()
        self.stopped = False

    def offer(self, servers: list[RpcServer]) -> bool:
        """Hand over this round's servers; False while the last round is still under way."""
        if self.busy_since is not None:
            return False
        self.servers, self.busy_since = servers, time.monotonic()
        self.wake.set()
        return True

    def run(self) -> None:
        try:
            while self.wake.wait() and not self.stopped:
                self.wake.clear()
                self.round()
        finally:
            connections.close_all()  # this thread's own connections

    def round(self) -> None:
        for server in self.servers:
            try:
                self.handle(server)
            except Exception:  # even recording the failure failed (the database, most likely)
                log.exception("%s: supervising it failed", server)
        close_old_connections()
        self.warned, self.busy_since = False, None

    def stop(self) -> None:
        self.stopped = True
        self.wake.set()


class Supervisor:
    def __init__(self) -> None:
        self.forwards: dict[int, ssh.Forward] = {}
        self.workers: dict[int, LaptopWorker] = {}
        self.lock = threading.Lock()  # guards forwards and closed: laptops' threads open and close forwards
        self.closed = False

    def tick(self) -> None:
        servers = list(RpcServer.objects.select_related("node"))
        by_node: dict[int, list[RpcServer]] = defaultdict(list)
        for server in servers:
            by_node[server.node_id].append(server)
        for node_id in set(self.workers) - set(by_node):
            self.workers.pop(node_id).stop()
        for node_id, its_servers in by_node.items():
            worker = self.worker(node_id, its_servers[0].node.name)
            if not worker.offer(its_servers):
                self.lagging(worker, its_servers[0].node.name)
        self.close_forwards_except({server.pk for server in servers})

    def worker(self, node_id: int, name: str) -> LaptopWorker:
        worker = self.workers.get(node_id)
        if worker is None or not worker.is_alive():
            worker = self.workers[node_id] = LaptopWorker(name, self.handle)
            worker.start()
        return worker

    @staticmethod
    def lagging(worker: LaptopWorker, name: str) -> None:
        since = worker.busy_since  # read once: the round may end meanwhile
        waited = time.monotonic() - since if since is not None else 0.0
        if waited > LAGGING_S and not worker.warned:
            worker.warned = True
            log.warning("laptop %s has kept its servers' check waiting %.0f s (its SSH hangs?); "
                        "the other laptops go on", name, waited)

    def handle(self, server: RpcServer) -> None:
        """One server's round; a failure is recorded on the server, never raised."""
        try:
            self.keep_running(server) if server.wanted else self.keep_stopped(server)
        except Stopping:
            pass
        except ssh.HostKeyMismatch as exc:
            server.node.refuse_host_key(exc.presented)
            self.update(server, status=ServerStatus.FAILED, last_death=str(exc))
        except (ssh.SSHError, rpcserver.RpcServerError, rpc.RpcError) as exc:
            if not moved_meanwhile(server):  # a round at an address the laptop has left: the next goes to the new
                self.failed(server, str(exc))
        except DatabaseError:  # not the server's fault: nothing to record it in either
            log.exception("%s: the database failed; trying again next round", server)
        except Exception as exc:
            log.exception("%s: supervising it failed", server)
            self.failed(server, f"The supervisor failed on it: {exc!r}")

    def close_forwards_except(self, kept: set[int]) -> None:
        with self.lock:
            gone = [self.forwards.pop(pk) for pk in list(self.forwards) if pk not in kept]
        for forward in gone:
            forward.close()

    def close(self) -> None:
        for worker in self.workers.values():
            worker.stop()
        deadline = time.monotonic() + STOP_WAIT_S
        for worker in self.workers.values():
            worker.join(max(deadline - time.monotonic(), 0))
        with self.lock:
            self.closed = True
            forwards, self.forwards = list(self.forwards.values()), {}
        for forward in forwards:
            forward.close()

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
            if state.pid != server.pid:  # started by a laptop too busy to write the pid at once
                self.update(server, pid=state.pid)
            return
        if not state.running:
            if server.status in (ServerStatus.RUNNING, ServerStatus.STARTING) and server.pid:
                self.record_death(server, state.log_tail)
            bind = node.host if server.direct else "127.0.0.1"
            started = rpcserver.start(target, node.install_dir, server.port, bind=bind, devices=server.devices)
            server.pid, server.awake = started.pid, started.awake or server.awake
        if not server.direct:
            self.open_forward(server)
        hello = handshake(server.endpoint) if not state.running else None
        self.update(server, status=ServerStatus.RUNNING, pid=server.pid or state.pid, failures=0, next_try_at=None,
                    awake=server.awake,
                    protocol=hello.version if hello else server.protocol,
                    free_memory=hello.free_memory if hello else server.free_memory,
                    started_at=timezone.now() if hello else server.started_at)
        if node.status != NodeStatus.READY:
            node.set_status(NodeStatus.READY)

    def keep_stopped(self, server: RpcServer) -> None:
        if server.status == ServerStatus.STOPPED:
            return
        rpcserver.stop(server.node.ssh_target(), server.node.install_dir, server.port)
        with self.lock:
            forward = self.forwards.pop(server.pk, None)
        if forward:
            forward.close()
        self.update(server, status=ServerStatus.STOPPED, pid=None, local_port=None)

    def forward_alive(self, server: RpcServer) -> bool:
        forward = self.forwards.get(server.pk)
        return (forward is not None and forward.alive() and forward.local_port == server.local_port
                and forward.host == server.node.host)

    def open_forward(self, server: RpcServer) -> None:
        if self.forward_alive(server):
            return
        with self.lock:
            old = self.forwards.pop(server.pk, None)
        if old:
            old.close()
        port = free_port(server.local_port)
        forward = ssh.forward(server.node.ssh_target(), server.port, port)
        with self.lock:
            kept = not self.closed  # a laptop slow to answer may finish after the supervisor closed
            if kept:
                self.forwards[server.pk] = forward
        if not kept:
            forward.close()
            raise Stopping
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
        was = server.status
        for name, value in fields.items():
            setattr(server, name, value)
        server.save(update_fields=list(fields))
        if server.status != was:
            tell_deployment(server)


def moved_meanwhile(server: RpcServer) -> bool:
    now = Node.objects.filter(pk=server.node_id).values_list("host", "port").first()
    return now is not None and now != (server.node.host, server.node.port)


def tell_deployment(server: RpcServer) -> None:
    """The deployment page whose stage this server is shows its state live (it said "Ready" beside a server
    that had failed, until a reload)."""
    stage = RpcServer.objects.filter(pk=server.pk).values("stage__deployment_id", "stage__position").first()
    if stage and stage["stage__deployment_id"]:
        broadcast(f"deployment_{stage['stage__deployment_id']}", "deployment.server", {
            "position": stage["stage__position"], "port": server.port, "status": server.status,
            "label": server.get_status_display(), "node": server.node.name,
            "why": server.last_death.partition("\n")[0].rstrip(".")})
