"""While a laptop serves layers the panel keeps it awake: the rpc-server runs under systemd-inhibit, which lets go
when the server stops; where systemd-inhibit cannot inhibit, the server runs anyway and the page says so.

The simulated laptops have no logind, which systemd-inhibit needs, so each test puts a stand-in first on the
laptop's PATH (nodes/simlan/power.py): it notes what it was asked to hold, runs the command and waits for it, as the
real one does. Everything else is real: sshd, the runtime, the server, the supervisor.
"""

from pathlib import Path

import pytest

from nodes.models import ActionKind, RpcServer
from nodes.remote import ssh
from nodes.servers import rpcserver
from nodes.simlan import power as simpower
from tests.conftest import wait_until
from tests.nodes.laptops import register, run_now
from tests.rows import client_for
from tests.services import lan_harness

PORT = 50421
# systemd-inhibit as a laptop with logind has it: holds while its command runs. Its log: what it held, and when
# it let go.
HOLDS = """#!/bin/sh
log="$HOME/inhibit.log"
while [ $# -gt 0 ]; do case "$1" in --*) opts="$opts $1"; shift ;; *) break ;; esac; done
echo "hold $$$opts" >> "$log"
"$@"; status=$?
echo "release $$" >> "$log"
exit $status
"""
# ... and as a laptop without logind has it (a container, a minimal install).
REFUSES = """#!/bin/sh
echo "Failed to inhibit: Could not activate remote peer." >&2
exit 1
"""


@pytest.fixture(scope="module")
def awake_lan():
    harness = lan_harness("awake", "10.225.0.0/24")
    lan = harness.up(1)
    try:
        yield harness, lan
    finally:
        harness.down()


@pytest.fixture
def node(awake_lan, transactional_db, runtime_bundle):
    harness, lan = awake_lan
    made = register(lan, lan.laptops[0])
    assert run_now(made, ActionKind.INSTALL_RUNTIME).status == "succeeded"
    yield made
    rpcserver.stop(made.ssh_target(), made.install_dir, PORT)
    ssh.sh(made.ssh_target(), 'rm -f "$HOME/inhibit.log"')


def give(harness, node, script: str) -> None:
    """The laptop's systemd-inhibit; the panel's connection opened before sshd set the new PATH is dropped."""
    simpower.give_tool(harness, 1, "systemd-inhibit", script)
    ssh.forget(node.ssh_target())


def holds(lan) -> list[list[str]]:
    log = Path(lan.laptops[0].home) / "inhibit.log"
    return [line.split() for line in log.read_text().splitlines()] if log.exists() else []


def serving_hold(lan) -> list[str] | None:
    return next((line for line in holds(lan) if "--why=serving-model-layers" in line), None)


def test_it_keeps_a_serving_laptop_awake_and_lets_go_when_the_server_stops(awake_lan, node):
    harness, lan = awake_lan
    give(harness, node, HOLDS)
    started = rpcserver.start(node.ssh_target(), node.install_dir, PORT)
    assert started.awake == "kept awake by systemd-inhibit"
    hold = wait_until(lambda: serving_hold(lan), 10, "the inhibitor holding")
    assert hold[2:] == ["--what=sleep:idle", "--who=clusterpanel", "--why=serving-model-layers", "--mode=block"]
    inhibitor = hold[1]
    assert Path(f"/proc/{inhibitor}").exists(), "held while the server runs"
    assert rpcserver.state(node.ssh_target(), node.install_dir, PORT).pid == started.pid, "the pid is the server's"
    rpcserver.stop(node.ssh_target(), node.install_dir, PORT)
    wait_until(lambda: ["release", inhibitor] in holds(lan), 10, "the inhibitor letting go")
    wait_until(lambda: not Path(f"/proc/{inhibitor}").exists(), 10, "the inhibitor gone")


def test_a_laptop_that_cannot_be_kept_awake_serves_anyway_and_says_so(awake_lan, node):
    harness, _ = awake_lan
    give(harness, node, REFUSES)
    started = rpcserver.start(node.ssh_target(), node.install_dir, PORT)
    assert started.awake == ("cannot keep awake: systemd-inhibit refused (Failed to inhibit: Could not activate "
                             "remote peer.)")
    assert rpcserver.state(node.ssh_target(), node.install_dir, PORT).running


def test_the_laptop_page_says_whether_its_server_keeps_it_awake(awake_lan, node, supervisor, alice):
    harness, lan = awake_lan
    give(harness, node, HOLDS)
    server = RpcServer.objects.create(node=node, port=PORT)

    def awake():
        server.refresh_from_db()
        return server.awake

    assert wait_until(awake, 60, "the supervisor starting the server") == "kept awake by systemd-inhibit"
    page = client_for(alice).get(f"/nodes/{node.name}/").content.decode()
    assert '<td class="awake">kept awake by systemd-inhibit</td>' in page
    assert serving_hold(lan) is not None
