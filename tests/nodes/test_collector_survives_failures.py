"""The metrics collector outlives a failed round: it logs it, keeps sampling every laptop, and only SIGTERM
ends it (under `make run` its exit would end the whole panel)."""

import signal
import subprocess
import sys
import time

import pytest

from nodes.metrics import store as metrics
from nodes.models import Node, NodeStatus
from tests.conftest import ROOT, child_env, stop, wait_until
from tests.nodes.laptops import register, set_link
from tests.nodes.trouble import locked_database


@pytest.fixture
def watched(lan, transactional_db):
    the_lan = lan(3)
    return [register(the_lan, laptop) for laptop in the_lan.laptops]


@pytest.fixture
def collector(tmp_path, transactional_db):
    """`manage.py metrics` with its log in a file."""
    log = tmp_path / "metrics.log"
    with open(log, "w") as out:
        process = subprocess.Popen([sys.executable, "manage.py", "metrics"], cwd=ROOT, env=child_env(),
                                   stdout=out, stderr=subprocess.STDOUT)
    yield process, log
    stop(process)


def status(node: Node) -> str:
    return Node.objects.get(pk=node.pk).status


def sampled_since(node: Node, since: float) -> bool:
    return any(sample["received"] > since for sample in metrics.recent(node.pk, 30))



def test_it_outlives_a_database_locked_past_its_timeout(lan, watched, collector):
    process, log = collector
    wait_until(lambda: all(status(node) == NodeStatus.READY for node in watched), 30, "every laptop streaming")
    dropped, others = watched[1], [watched[0], watched[2]]
    try:
        with locked_database():
            # the collector must write laptop 2 offline: the write waits out the lock, then fails
            set_link(lan(3), 2, "down")
            wait_until(lambda: "database is locked" in log.read_text(), 40, "the collector failing to write")
            time.sleep(1)
            assert process.poll() is None, "the failed write did not end the collector"
        wait_until(lambda: status(dropped) == NodeStatus.OFFLINE, 15, "the offline laptop written down after all")
        after = time.time()
        wait_until(lambda: all(sampled_since(node, after) for node in others), 10, "the others still sampled")
    finally:
        set_link(lan(3), 2, "up")
    wait_until(lambda: status(dropped) == NodeStatus.READY, 30, "the laptop back by itself")
    assert process.poll() is None
    process.send_signal(signal.SIGTERM)
    assert process.wait(15) == 0
