"""A laptop that comes back at another address (a new DHCP lease: its namespace's address changes and its sshd
listens there, nodes/simlan/dhcp.py) is found again by its pinned host key when the admin scans the range or types
the new address, and stays the same laptop: its row, its deployments' history, a probe at the new address. A
laptop showing another key at its old address is not matched; the host-key approval flow stays."""

import pytest
from django.test import Client

from models_app.models import Deployment, DeploymentStage, DeploymentStatus
from nodes.laptops import refind
from nodes.models import ActionKind, ActionStatus, LanScan, Node, NodeAction, NodeStatus, RpcServer
from nodes.remote import ssh
from nodes.simlan import dhcp as simdhcp
from nodes.tasks import run_action
from tests.jobs.standins import ready_deployment
from tests.nodes.laptops import register, run_now
from tests.services import lan_harness


@pytest.fixture(scope="module")
def dhcp():
    harness = lan_harness("refind", "10.220.0.0/24")
    harness.up(2)
    yield harness
    harness.down()


def admin(alice) -> Client:
    client = Client()
    client.force_login(alice)
    return client


def holding(node: Node) -> Deployment:
    deployment = ready_deployment()
    DeploymentStage.objects.create(deployment=deployment, position=0, node=node, first_layer=0, layer_count=2,
                                   memory={})
    return deployment


def laptop_at(dhcp, i: int):
    return next(laptop for laptop in dhcp.status().laptops if laptop.index == i)


def fresh(dhcp, i: int) -> Node:
    """Laptop `i` registered where it is now, then moved (as DHCP would) to a free address of the first /26."""
    node = register(dhcp.status(), laptop_at(dhcp, i))
    taken = {laptop.address for laptop in dhcp.status().laptops}
    free = next(str(dhcp.network[n]) for n in range(40, 60) if str(dhcp.network[n]) not in taken)
    simdhcp.move(dhcp, i, free)
    return node


def first_quarter(dhcp) -> str:
    return str(next(dhcp.network.subnets(new_prefix=26)))


def test_a_scan_finds_a_moved_laptop_and_it_stays_the_same_laptop(dhcp, alice):
    node = fresh(dhcp, 1)
    old, new = node.host, laptop_at(dhcp, 1).address
    at_home = register(dhcp.status(), laptop_at(dhcp, 2))
    assert run_now(at_home, ActionKind.PROBE).status == ActionStatus.SUCCEEDED
    ssh.forget(at_home.ssh_target())
    deployment = holding(node)
    server = RpcServer.objects.create(node=node, port=50052, wanted=True, status="running")
    answer = admin(alice).post("/api/nodes/scans/", {"addresses": first_quarter(dhcp)}, content_type="application/json")
    assert answer.status_code == 202 and answer.json()["status"] == "queued"
    refind.run(answer.json()["id"])  # what the worker runs
    scan = admin(alice).get(answer.json()["url"]).json()
    assert scan["status"] == "succeeded", scan["error"]
    assert scan["summary"].startswith(f"Found {node.name} at {new} (was {old}); standin #{deployment.pk} recovers")
    assert [(moved["name"], moved["host"], moved["was"]) for moved in scan["moved"]] == [(node.name, new, old)]
    moved = Node.objects.get(pk=node.pk)
    assert moved.host == new and moved.status == NodeStatus.NEW, "the same row, at the new address"
    assert deployment.stages.get().node_id == node.pk, "its deployments' history points at it still"
    deployment.refresh_from_db()
    assert deployment.status == DeploymentStatus.DEGRADED and f"moved to {new} (was {old})" in deployment.status_detail
    server.refresh_from_db()
    assert server.restart_requested, "its wanted rpc-server restarts at the new address"
    probe = NodeAction.objects.get(node=node, kind=ActionKind.PROBE, status=ActionStatus.QUEUED)
    run_action(probe.pk)
    probe.refresh_from_db()
    assert probe.status == ActionStatus.SUCCEEDED, probe.error
    assert Node.objects.get(pk=node.pk).status == NodeStatus.READY and moved.probes.exists()
    page = admin(alice).get(f"/nodes/?scan={scan['id']}").content.decode()
    assert f"Found {node.name} at {new} (was {old})" in page
    assert Node.objects.get(pk=at_home.pk).host == at_home.host, "a laptop at its own address stays"
    ssh.forget(moved.ssh_target())


def test_a_laptop_showing_another_key_at_its_old_address_is_not_matched(dhcp, db):
    node = register(dhcp.status(), laptop_at(dhcp, 2))
    dhcp.rekey(2)
    scan = LanScan.objects.create(addresses=first_quarter(dhcp))
    refind.run(scan.pk)
    scan.refresh_from_db()
    assert scan.status == ActionStatus.SUCCEEDED and scan.moved == []
    assert scan.summary.startswith("No laptop answered with a known key (")
    assert Node.objects.get(pk=node.pk).host == node.host
    ssh.forget(node.ssh_target())  # a connection made before the new key would still work
    assert run_now(node, ActionKind.PROBE).status == ActionStatus.FAILED
    assert Node.objects.get(pk=node.pk).status == NodeStatus.HOST_KEY_CHANGED, "an admin approves the new key"


def test_typing_the_new_address_moves_a_held_laptop_but_another_machine_is_refused(dhcp, alice):
    node = fresh(dhcp, 1)
    other = laptop_at(dhcp, 2).address  # another machine, another key
    deployment = holding(node)
    form = {"name": node.name, "host": other, "port": 22, "username": node.username, "connection": node.connection,
            "install_dir": node.install_dir, "pipeline_order": 0, "usable_gb": "", "reserve_gb": 1}
    refused = admin(alice).post(f"/nodes/{node.name}/edit/", form)
    assert refused.status_code == 400
    assert (f"holds layers of standin #{deployment.pk}: stop that deployment before changing its host, or give an "
            "address where this laptop answers with its pinned host key") in refused.content.decode()
    assert Node.objects.get(pk=node.pk).host == node.host
    new = laptop_at(dhcp, 1).address
    saved = admin(alice).post(f"/nodes/{node.name}/edit/", {**form, "host": new}, follow=True)
    assert "is the same laptop, moved" in saved.content.decode()
    assert Node.objects.get(pk=node.pk).host == new
    assert Deployment.objects.get(pk=deployment.pk).status == DeploymentStatus.DEGRADED


@pytest.mark.parametrize("given, said", [
    ("10.0.0.0/16", "holds more than 1024 addresses"),
    ("10.0.0.0-10.0.8.0", "holds more than 1024 addresses"),
    ("the lab", "is not a range: write it as 192.168.1.0/24"),
    ("10.0.0.9-10.0.0.1", "the first address must come before the last"),
    ("", "is not a range"),
    ("8.8.8.0/24", "8.8.8.1 is not a private, link-local or loopback address"),
    ("224.0.0.0/30", "224.0.0.1 is no address a laptop can have"),
])
def test_bad_ranges_are_refused_in_words_and_nothing_is_scanned(alice, given, said):
    answer = admin(alice).post("/api/nodes/scans/", {"addresses": given}, content_type="application/json")
    error = answer.json()["error"]
    assert answer.status_code == 400 and said in error and error.endswith("Nothing was scanned.")
    page = admin(alice).post("/nodes/find-moved/", {"addresses": given})
    assert page.status_code == 400 and "Nothing was scanned" in page.content.decode()
    assert not LanScan.objects.exists()


def test_public_addresses_only_when_allowed_and_only_for_admins(alice, bob):
    assert refind.addresses("8.8.8.0/30", public=True) == ["8.8.8.1", "8.8.8.2"]
    assert len(refind.addresses("169.254.1.0/24")) == 254 and refind.addresses("127.0.0.1") == ["127.0.0.1"]
    plain = Client()
    plain.force_login(bob)
    assert plain.post("/api/nodes/scans/", {"addresses": "10.0.0.0/24"}, content_type="application/json"
                      ).status_code == 403


@pytest.mark.django_db
def test_a_scan_whose_worker_stopped_is_settled_and_one_that_fails_says_what_it_moved(monkeypatch):
    from datetime import timedelta

    from django.utils import timezone

    from clusterpanel.kit.celery import app
    from nodes.tasks import settle_left_behind
    from tests.rows import HOST_KEY

    lost, busy = LanScan.objects.create(addresses="10.0.0.0/30"), LanScan.objects.create(addresses="10.0.1.0/30")
    LanScan.objects.filter(pk__in=[lost.pk, busy.pk]).update(status=ActionStatus.RUNNING)
    LanScan.objects.filter(pk=lost.pk).update(created=timezone.now() - timedelta(minutes=11))
    settle_left_behind(app, "me@tests")
    lost.refresh_from_db()
    assert (lost.status, lost.error) == (ActionStatus.FAILED, "The worker running this scan stopped before it "
                                                              "finished; scan again.")
    assert LanScan.objects.get(pk=busy.pk).status == ActionStatus.RUNNING, "a scan of a few seconds ago runs on"

    Node.objects.create(name="lab-1", host="10.0.0.1", username="lab", host_key=HOST_KEY)
    monkeypatch.setattr(refind, "keys_at", lambda where, port, kind: {"10.0.0.2": HOST_KEY})

    def moved_then_failed(node, seen, nodes, findings, user):
        findings.moved.append({"name": node.name, "host": seen[0], "was": node.host, "follows": []})
        raise OSError("the database's disk is full")

    monkeypatch.setattr(refind, "match", moved_then_failed)
    scan = LanScan.objects.create(addresses="10.0.0.0/30")
    refind.run(scan.pk)
    scan.refresh_from_db()
    assert scan.status == ActionStatus.FAILED
    assert scan.error == ("The scan failed: the database's disk is full. Before that it moved lab-1 to 10.0.0.2 "
                          "(was 10.0.0.1).")
    assert [moved["name"] for moved in scan.moved] == ["lab-1"]
