"""A laptop that suddenly presents another host key is refused and flagged until an admin approves."""

import time

import pytest

from nodes.models import ActionKind, ActionStatus, Node, NodeStatus
from nodes.remote import ssh
from tests.conftest import PASSWORD
from tests.nodes.laptops import register, run_now
from tests.services import lan_harness, unused_address


@pytest.fixture(scope="module")
def rekey_lan():
    harness = lan_harness("rekey", "10.237.0.0/24")
    yield harness, harness.up(1)
    harness.down()


def test_it_refuses_a_changed_host_key_flags_the_laptop_and_waits_for_approval(rekey_lan, client, alice):
    harness, lan = rekey_lan
    node = register(lan, lan.laptops[0])
    assert run_now(node, ActionKind.PROBE).status == ActionStatus.SUCCEEDED
    ssh.forget(node.ssh_target())
    reinstalled = harness.rekey(1)

    refused = run_now(node, ActionKind.PROBE)
    node.refresh_from_db()
    assert refused.status == ActionStatus.FAILED and "refusing to connect" in refused.error
    assert node.status == NodeStatus.HOST_KEY_CHANGED
    assert node.presented_host_key == reinstalled.host_key
    assert reinstalled.host_key_fingerprint in node.status_detail
    assert "must approve" in run_now(node, ActionKind.PROBE).error, "nothing runs until an admin decides"

    client.login(username="alice", password=PASSWORD)
    page = client.get(f"/nodes/{node.name}/")
    assert reinstalled.host_key_fingerprint.encode() in page.content
    compare = client.get(f"/nodes/{node.name}/approve-host-key/")
    assert compare.context["presented_fingerprint"] == reinstalled.host_key_fingerprint
    assert node.host_key_fingerprint in compare.content.decode()
    assert Node.objects.get(pk=node.pk).host_key == node.host_key, "looking approves nothing"
    client.post(f"/nodes/{node.name}/approve-host-key/", {"signed_host_key": compare.context["signed"]})
    node.refresh_from_db()
    assert node.host_key == reinstalled.host_key and node.presented_host_key == ""
    assert run_now(node, ActionKind.PROBE).status == ActionStatus.SUCCEEDED


def test_it_gives_up_on_an_unreachable_laptop_without_hanging_a_worker(rekey_lan, db):
    """An unused address inside the LAN this test made: nothing answers there."""
    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJRvvesEHT9Lj/odiUekLSyxfHkxh+kIRGnuGyJVpB1/"
    _, lan = rekey_lan
    address = unused_address(lan.subnet, 200)
    node = Node.objects.create(name="gone", host=address, username="u", host_key=key,
                               private_key=ssh.generate_key_pair("t")[0])
    started = time.monotonic()
    action = run_now(node, ActionKind.PROBE)
    assert time.monotonic() - started < ssh.CONNECT_TIMEOUT + 5
    node.refresh_from_db()
    assert action.status == ActionStatus.FAILED and f"Cannot reach {address}" in action.error
    assert node.status == NodeStatus.OFFLINE


def test_approval_takes_exactly_the_key_shown_even_if_the_laptop_changed_again(rekey_lan, client, alice):
    harness, lan = rekey_lan
    node = register(lan, lan.laptops[0], name="twice")
    node.refuse_host_key(lan.laptops[0].host_key)  # as a failed probe would: the laptop was made anew
    Node.objects.filter(pk=node.pk).update(host_key=harness.rekey(1).host_key)  # pinned: an older key
    shown_key = harness.rekey(1).host_key
    client.login(username="alice", password=PASSWORD)
    compare = client.get("/nodes/twice/approve-host-key/")
    assert compare.context["presented_fingerprint"] == ssh.fingerprint(shown_key)
    newest = harness.rekey(1).host_key  # changes again after the admin looked
    client.post("/nodes/twice/approve-host-key/", {"signed_host_key": compare.context["signed"]})
    node.refresh_from_db()
    assert node.host_key == shown_key != newest
    tampered = compare.context["signed"][:-3] + "abc"
    Node.objects.filter(pk=node.pk).update(status=NodeStatus.HOST_KEY_CHANGED)
    page = client.post("/nodes/twice/approve-host-key/", {"signed_host_key": tampered}, follow=True)
    assert "expired or was altered" in page.content.decode()
    assert Node.objects.get(pk=node.pk).host_key == shown_key
