"""A deployment over two laptops while a third one's sshd is stopped (SIGSTOP) is ready as fast as ever and
their metrics keep coming: the supervisor, the collector and the deploying process each have something stuck
on the hung laptop (its rpc-server, its metric stream, a probe), and none of that holds the others up."""

import subprocess
import sys
import threading
import time
from itertools import pairwise

from models_app.deploying import deploy
from models_app.library.adding import ensure_bundled
from models_app.models import DeploymentStatus
from nodes.metrics import store as metrics
from nodes.models import Node, NodeStatus, RpcServer, ServerStatus
from nodes.probing import probe
from nodes.remote import ssh
from tests.conftest import ROOT, child_env, stop, wait_until
from tests.jobs.cluster import end_engines
from tests.nodes.trouble import frozen_sshd

# Everything before the load is SSH to the two healthy laptops and takes a few seconds; waiting once on the
# hung laptop costs a whole SSH connect timeout (10 s) or command timeout (15 s).
SERVERS_UP_WITHIN_S = 10
READY_WITHIN_S = 120
SAMPLE_GAP_S = 5  # the collector samples each laptop every second
WATCH_S = 14  # samples are watched at least this long: longer than one SSH connect timeout


def running(server: RpcServer) -> bool:
    server.refresh_from_db()
    return server.status == ServerStatus.RUNNING and bool(server.endpoint)


def received(node: Node, since: float) -> list[float]:
    return sorted(sample["received"] for sample in metrics.recent(node.pk, 300) if sample["received"] >= since)


def longest_gap(node: Node, since: float, until: float) -> float:
    """The longest time between the laptop's samples in [since, until], its ends included."""
    times = [since, *received(node, since), until]
    return max(later - earlier for earlier, later in pairwise(times))


class Prober(threading.Thread):
    """Probes the hung laptop over and over in this process (a probe beside the deployment, as a worker
    may run), each time waiting out an SSH timeout."""

    def __init__(self, node: Node) -> None:
        super().__init__(daemon=True)
        self.node, self.done = node, threading.Event()

    def run(self) -> None:
        ssh.forget(self.node.ssh_target())  # the first try connects (registering it left a connection)
        while not self.done.is_set():
            try:
                probe.probe(self.node.ssh_target(), self.node.install_dir)
            except Exception:  # what a hung laptop gives: the next try waits again
                pass


def prepared(deployment, monkeypatch) -> tuple[float, float]:
    """Prepares the deployment: seconds until its rpc-servers were up (the load began), and until it was done."""
    began, loading = time.monotonic(), []
    verify_load = deploy.verify_load

    def timed(*args, **kwargs):
        loading.append(time.monotonic())
        return verify_load(*args, **kwargs)

    monkeypatch.setattr(deploy, "verify_load", timed)
    deploy.prepare(deployment)
    done = time.monotonic()
    return (loading[0] - began if loading else float("inf")), done - began


def test_it_deploys_over_two_laptops_and_samples_them_while_a_third_laptops_ssh_hangs(
        lan, nodes, supervisor, monkeypatch):
    hung, healthy = nodes[2], nodes[:2]
    server = RpcServer.objects.create(node=hung, port=50170)  # the supervisor has work on the hung laptop too
    wait_until(lambda: running(server), 60, "the hung laptop's rpc-server running")
    deployment = deploy.create(ensure_bundled(), healthy, 1024, mode="even")
    prober = Prober(hung)
    try:
        with frozen_sshd(lan(3).laptops[2]):
            collector = subprocess.Popen([sys.executable, "manage.py", "metrics"], cwd=ROOT, env=child_env())
            try:
                prober.start()
                wait_until(lambda: all(received(node, time.time() - 2) for node in healthy), 30,
                           "samples from the healthy laptops")
                since = time.time()
                servers_up, ready = prepared(deployment, monkeypatch)
                time.sleep(max(0.0, since + WATCH_S - time.time()))  # the engine loads meanwhile
                until = time.time()
                deployment.refresh_from_db()
                assert deployment.status == DeploymentStatus.READY, deployment.status_detail
                print(f"rpc-servers up after {servers_up:.1f} s, ready after {ready:.1f} s")  # the margins, with -s
                assert servers_up < SERVERS_UP_WITHIN_S, f"rpc-servers up after {servers_up:.1f} s"
                assert ready < READY_WITHIN_S, f"ready after {ready:.1f} s"
                for node in healthy:
                    gap = longest_gap(node, since, until)
                    assert gap < SAMPLE_GAP_S, f"{node}: no sample for {gap:.1f} s while deploying"
                    assert len(received(node, since)) >= until - since - 4, f"{node}: samples stopped coming"
                offline = Node.objects.filter(pk__in=[n.pk for n in healthy], status=NodeStatus.OFFLINE)
                assert not offline.exists(), "the healthy laptops are not shown offline"
            finally:
                prober.done.set()
                stop(collector)
        prober.join(60)  # its SSH answers now that the laptop goes on
    finally:
        deploy.stop(deployment)
        supervisor.terminate()
        supervisor.wait(30)
        end_engines()
