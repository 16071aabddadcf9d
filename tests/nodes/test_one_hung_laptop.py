"""One laptop whose SSH hangs delays nobody else: the other laptops' dead servers are still restarted within
10 s, and their metrics keep coming (they stay online)."""

import subprocess
import sys
import time

from nodes.metrics import store as metrics
from nodes.models import Node, NodeStatus, RpcServer, ServerStatus
from nodes.remote import ssh
from tests.conftest import ROOT, child_env, stop, wait_until
from tests.nodes.trouble import frozen_sshd

RESTART_WITHIN_S = 10  # README: a dead server is back within 10 s
WATCH_S = 14  # longer than one SSH connect timeout (10 s), which a hung laptop makes a caller wait


def running(server: RpcServer) -> bool:
    server.refresh_from_db()
    return server.status == ServerStatus.RUNNING and bool(server.endpoint)


def restarted(server: RpcServer, first_pid: int) -> bool:
    return running(server) and server.restarts == 1 and server.pid != first_pid


def offline(nodes: list[Node]) -> set[str]:
    return {node.name for node in Node.objects.filter(pk__in=[n.pk for n in nodes], status=NodeStatus.OFFLINE)}


def samples_since(node: Node, since: float) -> int:
    return sum(1 for sample in metrics.recent(node.pk, 60) if sample["received"] >= since)


def watch(server: RpcServer, first_pid: int, healthy: list[Node]) -> tuple[float | None, set[str]]:
    """For WATCH_S: when the killed server was back (seconds), and which healthy laptops were ever shown offline."""
    began, back_after, seen_offline = time.monotonic(), None, set()
    while time.monotonic() - began < WATCH_S:
        seen_offline |= offline(healthy)
        if back_after is None and restarted(server, first_pid):
            back_after = time.monotonic() - began
        time.sleep(0.2)
    return back_after, seen_offline


def test_it_restarts_and_samples_the_other_laptops_while_one_laptops_ssh_hangs(lan, nodes, supervisor):
    servers = [RpcServer.objects.create(node=node, port=port)
               for node, port in zip(nodes, (50160, 50161, 50162), strict=True)]
    for server in servers:
        wait_until(lambda s=server: running(s), 60, f"{server} running")
    hung, healthy, victim = nodes[0], nodes[1:], servers[1]
    with frozen_sshd(lan(3).laptops[0]):
        # Started now, the collector connects to every laptop at once: the hung one's connect must wait alone.
        collector = subprocess.Popen([sys.executable, "manage.py", "metrics"], cwd=ROOT, env=child_env())
        try:
            time.sleep(1)  # the supervisor's next round for the hung laptop is now stuck in SSH
            # The healthy laptops' streams first: a busy machine once took seconds to start the collector at all.
            started = time.time()
            wait_until(lambda: all(samples_since(node, started) for node in healthy), 60, "the healthy laptops sampled")
            since, first_pid = time.time(), victim.pid
            ssh.sh(victim.node.ssh_target(), 'kill -9 "$1"', str(first_pid))
            back_after, seen_offline = watch(victim, first_pid, healthy)
            assert back_after is not None and back_after < RESTART_WITHIN_S, f"restarted after {back_after} s"
            assert not seen_offline, f"healthy laptops shown offline: {seen_offline}"
            for node in healthy:
                assert samples_since(node, since) >= WATCH_S - 4, f"{node}: samples stopped coming"
            assert offline([hung]) == {hung.name}, "the hung laptop itself is shown offline"
        finally:
            stop(collector)
