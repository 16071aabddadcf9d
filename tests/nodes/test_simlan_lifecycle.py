"""`simlan up/down/status`: what it makes, it removes, even after a crash."""

import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from clusterpanel.kit.procs import is_running
from nodes.remote import ssh
from nodes.simlan.lan import SimLan
from tests.services import lan_harness, slotted

SUBNET = "10.233.0.0/24"


def namespaces() -> str:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


def links() -> str:
    return subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout


def users_named(prefix: str) -> list[str]:
    return [e.pw_name for e in pwd.getpwall() if e.pw_name.startswith(prefix)]


@pytest.fixture
def harness(lan_turn):
    lan = lan_harness("life", SUBNET)
    yield lan
    lan.down()


def test_it_removes_every_namespace_link_user_and_process_it_made(harness):
    lan = harness.up(2)
    pids = [laptop.sshd_pid for laptop in lan.laptops]
    assert all(is_running(pid) for pid in pids)
    name = harness.name
    assert f"cp-{name}-1" in namespaces() and f"cpbr-{name}" in links()
    harness.down()
    assert f"cp-{name}-" not in namespaces()
    assert f"cpv-{name}" not in links() and f"cpbr-{name}" not in links()
    assert users_named(f"cpsim-{name}-") == []
    assert not any(is_running(pid) for pid in pids)
    assert harness.status() is None


def test_it_leaves_alone_a_lan_whose_name_only_adds_a_digit_to_its_own(harness):
    """LAN life1's laptop 2 has the link cpv-life12, which by name alone is LAN life's laptop 12."""
    neighbour = SimLan(harness.name + "1", Path(settings.DATA_DIR) / "simlan", slotted("near", "10.239.0.0/24")[1])
    try:
        neighbour.up(2)
        harness.up(1)
        harness.down()
        assert neighbour.veth(2) in links() and neighbour.bridge in links()
        assert f"cp-{neighbour.name}-2" in namespaces()
    finally:
        neighbour.down()


def test_it_cleans_up_a_crashed_lan_before_the_next_up(harness):
    harness.up(2)
    harness.state_file.unlink()  # as if the process that made it had died
    lan = harness.up(1)
    assert len(lan.laptops) == 1
    assert f"cp-{harness.name}-2" not in namespaces()
    assert users_named(f"cpsim-{harness.name}-") == [f"cpsim-{harness.name}-1"]


def test_it_caps_each_link_at_the_rate_asked_for(harness):
    lan = harness.up(1, rate="100mbit")
    qdisc = subprocess.run(["tc", "qdisc", "show", "dev", harness.veth(1)], capture_output=True, text=True).stdout
    assert "tbf" in qdisc and "100Mbit" in qdisc
    inside = subprocess.run(["tc", "-n", lan.laptops[0].netns, "qdisc", "show", "dev", "eth0"],
                            capture_output=True, text=True).stdout
    assert "tbf" in inside


def test_it_gives_a_laptop_less_memory_through_a_cgroup(harness):
    lan = harness.up(1, memory="256M")
    laptop = lan.laptops[0]
    result = ssh.run(ssh.SSHTarget(laptop.address, laptop.user, laptop.host_key,
                                   private_key=Path(lan.key_path).read_text()),
                     ["sh", "-c", "cat /proc/self/cgroup | grep memory"])
    group = result.stdout.strip().split(":")[-1]
    assert group == f"/clusterpanel-{harness.name}-1"
    limit = Path("/sys/fs/cgroup/memory") / group.lstrip("/") / "memory.limit_in_bytes"
    assert int(limit.read_text()) == 256 * 2**20


def test_it_rejects_a_rate_it_cannot_read(harness):
    with pytest.raises(CommandError, match="write it like 1gbit"):
        call_command("simlan", "up", "1", "--name", harness.name, "--subnet", str(harness.network), "--rate", "fast")
    assert f"cp-{harness.name}-" not in namespaces()


def test_it_explains_that_it_needs_root(lan_turn, monkeypatch):
    name, subnet = slotted("life", SUBNET)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(CommandError) as error:
        call_command("simlan", "up", "2", "--name", name, "--subnet", subnet)
    assert "needs root" in str(error.value)
    assert "addnode" in str(error.value), "it says how to register real laptops instead"
    assert f"cp-{name}-" not in namespaces()


def test_it_exits_non_zero_without_root():
    """As a real unprivileged user (nobody): everything is imported first, then root is dropped."""
    code = (
        "import os, sys, django; django.setup(); "
        "from django.core.management import execute_from_command_line; "
        "import nodes.management.commands.simlan, django.core.management.base, clusterpanel.urls; "
        "os.setgid(65534); os.setuid(65534); "
        "execute_from_command_line(['manage.py', 'simlan', 'up', '1', '--name', 'life'])"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "clusterpanel.settings", "SECRET_KEY": "x" * 50}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                            cwd=settings.BASE_DIR)
    assert result.returncode != 0
    assert "needs root" in result.stderr
    assert "Traceback" not in result.stderr
