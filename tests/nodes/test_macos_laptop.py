"""A Mac on the LAN (a simulated laptop answering through recorded macOS tools, nodes/simlan/systems.py; no setsid, no
nproc): it is probed and shown as macOS, told there is no macOS bundle and how to build, its rpc-server is started,
watched, restarted after a kill and stopped by the supervisor, its samples are read; a Mac lacking its own tools is
told so.

What is real: sshd, the shell, awk, ps, the rpc-server (Linux's binary: the runtime is put there before the laptop
becomes a Mac, as a Mac's own build would be), the supervisor. What is recorded: the answers of macOS's tools."""

from pathlib import Path

import pytest

from nodes.metrics import sampler
from nodes.models import ActionKind, ActionStatus, RpcServer, ServerStatus
from nodes.probing import platforms, probe
from nodes.remote import ssh
from nodes.runtime import install
from nodes.runtime.bundle import find_bundle
from nodes.servers import rpcserver
from nodes.simlan import systems as simos
from tests.conftest import PASSWORD, wait_until
from tests.nodes.laptops import register, run_now, target
from tests.services import lan_harness

RECORDING = Path(__file__).parent / "fixtures" / "platforms" / "macbook-air-m2.txt"
RESTART_WITHIN_S = 10
GiB = 2**30


@pytest.fixture(scope="module")
def mac_lan(runtime_bundle):
    harness = lan_harness("macos", "10.222.0.0/24")
    lan = harness.up(2)
    try:
        for laptop in lan.laptops:  # the runtime first, while it is still Linux
            where = target(lan, laptop)
            install.install_runtime(where, "~/.clusterpanel", find_bundle(), probe.probe(where, "~/.clusterpanel"),
                                    lambda *args, **kwargs: None)
            ssh.forget(where)
        simos.make_mac(harness, 1, RECORDING)
        simos.make_mac(harness, 2, RECORDING, without=("vm_stat", "sysctl"))
        yield harness.status()
    finally:
        harness.down()


@pytest.fixture
def mac(mac_lan, db):
    node = register(mac_lan, mac_lan.laptops[0], name="mac")
    yield node
    ssh.sh(node.ssh_target(), 'for f in .clusterpanel/rpc/*/pid; do kill "$(cat "$f")"; done 2>/dev/null; true')
    ssh.forget(node.ssh_target())


def test_it_is_probed_over_ssh_and_shown_as_macos(mac, client, alice):
    assert ssh.sh(mac.ssh_target(), "command -v setsid || command -v nproc").exit_status != 0, "as on a Mac"
    action = run_now(mac, ActionKind.PROBE)
    assert action.status == ActionStatus.SUCCEEDED, action.error
    facts = mac.probes.first().facts
    assert (facts["os"], facts["arch"], facts["platform"], facts["cpu_model"]) == ("Darwin", "arm64", "macOS 14.5",
                                                                                   "Apple M2")
    assert facts["ram_total"] == 16 * GiB and facts["memory_pressure"] == "normal"
    assert (facts["battery_state"], facts["battery_percent"], facts["link_kind"]) == ("on battery", 83, "wifi")
    client.login(username="alice", password=PASSWORD)
    page = client.get(f"/nodes/{mac.name}/").content.decode()
    assert "macOS 14.5 · kernel 23.5.0 · arm64" in page and "memory pressure normal (62% free)" in page


def test_installing_says_there_is_no_macos_bundle_and_leaves_the_runtime_as_it_was(mac):
    where = mac.ssh_target()
    before = ssh.sh(where, "readlink .clusterpanel/runtime/current").stdout
    action = run_now(mac, ActionKind.INSTALL_RUNTIME)
    assert action.status == ActionStatus.FAILED
    assert "it runs macOS 14.5, and there is no macOS bundle" in action.error
    assert "Build the runtime here" in action.error
    assert ssh.sh(where, "readlink .clusterpanel/runtime/current").stdout == before


def test_building_without_the_xcode_command_line_tools_says_how_and_copies_nothing(mac):
    action = run_now(mac, ActionKind.BUILD_RUNTIME)
    assert action.status == ActionStatus.FAILED
    assert "the Xcode command line tools" in action.error and "`xcode-select --install`" in action.error
    assert ssh.sh(mac.ssh_target(), "ls .clusterpanel/downloads/llama-rpc-source-*").exit_status != 0


def test_its_rpc_server_is_started_watched_restarted_and_stopped_without_setsid(mac, transactional_db, supervisor):
    server = RpcServer.objects.create(node=mac, port=50471)
    wait_until(lambda: RpcServer.objects.get(pk=server.pk).status == ServerStatus.RUNNING, 60, "the server running")
    server.refresh_from_db()
    assert server.awake == "kept awake by caffeinate"
    where = mac.ssh_target()
    command = ssh.sh(where, 'ps -p "$1" -o command=', str(server.pid)).stdout
    assert "ggml-rpc-server" in command and " -t 8 " in command, "one thread per core, as sysctl hw.logicalcpu says"
    ssh.sh(where, 'kill -9 "$1"', str(server.pid))
    wait_until(lambda: RpcServer.objects.get(pk=server.pk).restarts == 1, RESTART_WITHIN_S, "the restart")
    server.refresh_from_db()
    assert "killed (signal 9)" in server.last_death
    wait_until(lambda: rpcserver.state(where, mac.install_dir, 50471).running, 30, "the new server running")
    RpcServer.objects.filter(pk=server.pk).update(wanted=False)
    wait_until(lambda: not rpcserver.state(where, mac.install_dir, 50471).running, 30, "the server stopped")


def test_its_samples_come_from_its_own_tools(mac):
    feed, sample = sampler.Sampler(), None
    for line in ssh.stream(mac.ssh_target(), sampler.SCRIPT, "1", idle_timeout=10):
        sample = feed.feed(line)
        if sample:
            break
    assert (sample["cpu"], sample["cores"], sample["ram_total"]) == (20.8, [], 16 * GiB)
    assert sample["battery"] == {"state": "on battery", "percent": 83, "note": ""}
    assert sample["ram_available"] == (5513 + 298744 + 2875) * 16384


def test_a_mac_without_its_own_tools_is_told_so(mac_lan, db):
    node = register(mac_lan, mac_lan.laptops[1], name="bare-mac")
    action = run_now(node, ActionKind.PROBE)
    assert action.status == ActionStatus.FAILED
    assert "This Mac does not answer `sysctl` or `vm_stat`" in action.error and "PATH" in action.error
    assert not node.probes.exists(), "no probe half-recorded"
    assert platforms.NEEDED_ON_MAC["sysctl"] in action.error
