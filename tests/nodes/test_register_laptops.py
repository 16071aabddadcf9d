"""Registering laptops: the host key is pinned, the login proven, and nothing is saved on failure."""

import io
import re
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from nodes.models import Node, NodeStatus
from tests.services import unused_address


def addnode(*args: str, stdin: str = "") -> str:
    out = io.StringIO()
    call_command("addnode", *args, stdout=out, stdin=io.StringIO(stdin))
    return out.getvalue()


def test_it_registers_three_laptops_and_probes_each(lan, db):
    the_lan = lan(3)
    for laptop in the_lan.laptops:
        out = addnode("--name", laptop.name, "--host", laptop.address, "--user", laptop.user,
                      "--key-file", the_lan.key_path, "--fingerprint", laptop.host_key_fingerprint)
        assert f"presents host key {laptop.host_key_fingerprint}" in out
        assert "Probe:" in out and "GiB RAM" in out
    nodes = Node.objects.order_by("name")
    assert [n.name for n in nodes] == [laptop.name for laptop in the_lan.laptops]
    for node, laptop in zip(nodes, the_lan.laptops, strict=True):
        assert node.host_key == laptop.host_key
        assert node.status == NodeStatus.READY
        assert node.probes.first().facts["hostname"] == laptop.netns


def test_it_installs_the_panels_key_with_a_password_used_once(lan, db):
    laptop = lan(3).laptops[1]
    addnode("--name", "by-password", "--host", laptop.address, "--user", laptop.user, "--password",
            "--fingerprint", laptop.host_key_fingerprint, stdin=laptop.password + "\n")
    node = Node.objects.get(name="by-password")
    assert node.private_key == "", "it logs in with the panel's own key from now on"
    assert node.status == NodeStatus.READY
    authorized = (Path(laptop.home) / ".ssh" / "authorized_keys").read_text()
    from nodes.models import PanelKey

    assert PanelKey.get().public_key in authorized


def test_it_refuses_a_wrong_key_and_saves_nothing(lan, db, tmp_path):
    from nodes.remote import ssh

    laptop = lan(3).laptops[0]
    stranger = tmp_path / "stranger"
    stranger.write_text(ssh.generate_key_pair("stranger")[0])
    with pytest.raises(CommandError, match="refused our key or password"):
        addnode("--name", "wrong-key", "--host", laptop.address, "--user", laptop.user,
                "--key-file", str(stranger), "--yes")
    assert not Node.objects.filter(name="wrong-key").exists()


def test_it_refuses_a_host_key_that_is_not_the_expected_one(lan, db):
    laptop, other = lan(3).laptops[:2]
    with pytest.raises(CommandError, match="not the fingerprint you expected"):
        addnode("--name", "spoofed", "--host", laptop.address, "--user", laptop.user,
                "--key-file", lan(3).key_path, "--fingerprint", other.host_key_fingerprint)
    assert not Node.objects.exists()


def test_it_says_plainly_that_a_file_is_not_a_key(lan, db, tmp_path):
    laptop = lan(3).laptops[0]
    garbage = tmp_path / "not-a-key"
    garbage.write_text("hello")
    with pytest.raises(CommandError, match="not an unencrypted Ed25519, ECDSA or RSA key"):
        addnode("--name", "garbage", "--host", laptop.address, "--user", laptop.user, "--key-file", str(garbage))


def test_it_gives_up_on_an_unreachable_address_within_the_connect_timeout(lan, db):
    import time

    from nodes.remote import ssh

    ghost = unused_address(lan(3).subnet)
    started = time.monotonic()
    with pytest.raises(CommandError, match=f"Cannot reach {re.escape(ghost)}:22"):
        addnode("--name", "ghost", "--host", ghost, "--user", "nobody", "--password", "--yes")
    assert time.monotonic() - started < ssh.CONNECT_TIMEOUT + 5
    assert not Node.objects.exists()
