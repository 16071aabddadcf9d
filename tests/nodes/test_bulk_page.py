"""The Laptops page's action bar follows each laptop's own rules: restarting rpc-servers and removing laptops ask
first, naming what they end (a deployment that loses layers); a removal of a laptop a deployment holds, a busy
laptop or an empty selection is refused in words with nothing started; the selection then shows on the page."""

import pytest
from django.test import Client

from models_app.models import DeploymentStage, DeploymentStatus
from nodes.models import ActionKind, ActionStatus, Node, NodeAction, RpcServer
from tests.jobs.standins import ready_deployment
from tests.rows import HOST_KEY


@pytest.fixture
def admin(alice) -> Client:
    client = Client()
    client.force_login(alice)
    return client


def laptops(*names: str) -> list[Node]:
    return [Node.objects.create(name=name, host=f"192.0.2.{i + 10}", username="lab", host_key=HOST_KEY)
            for i, name in enumerate(names)]


def held(node: Node, port: int) -> int:
    deployment = ready_deployment(status=DeploymentStatus.READY)
    server = RpcServer.objects.create(node=node, port=port)
    DeploymentStage.objects.create(deployment=deployment, position=0, node=node, first_layer=0, layer_count=4,
                                   memory={}, server=server)
    return deployment.pk


@pytest.mark.django_db
def test_a_restart_asks_first_naming_the_deployment_that_loses_layers(admin):
    lab_1, lab_2, lab_10 = laptops("lab-1", "lab-2", "lab-10")
    deployment = held(lab_2, 50052)
    RpcServer.objects.create(node=lab_10, port=50053)
    asked = admin.post("/nodes/actions/", {"action": "restart_rpc", "node": ["lab-10", "lab-1", "lab-2"]})
    page = asked.content.decode()
    assert asked.status_code == 200 and "Restart the rpc-servers of 3 laptops?" in page
    assert "No running deployment uses lab-10:50053: it restarts within seconds." in page
    assert f"lab-2:50052: standin #{deployment} loses layers 0–3" in page
    assert "lab-1 has no rpc-server running: nothing to restart there." in page
    assert page.count('name="node"') == 3 and not NodeAction.objects.exists()

    done = admin.post("/nodes/actions/", {"action": "restart_rpc", "node": ["lab-10", "lab-1", "lab-2"],
                                          "confirmed": "1"})
    ids = ",".join(str(a.pk) for a in NodeAction.objects.order_by("node__name"))
    assert done.status_code == 302 and done["Location"].startswith("/nodes/?actions=")
    assert NodeAction.objects.filter(kind=ActionKind.RESTART_RPC).count() == 3 and ids


@pytest.mark.django_db
def test_a_removal_asks_first_then_is_refused_for_a_held_laptop(admin):
    lab_1, lab_2 = laptops("lab-1", "lab-2")
    RpcServer.objects.create(node=lab_1, port=50052, wanted=False)
    asked = admin.post("/nodes/actions/", {"action": "remove", "node": ["lab-2", "lab-1"]}).content.decode()
    assert "Remove 2 laptops?" in asked and "lab-1, lab-2 leave the panel" in asked
    assert "rpc-servers are stopped on the laptop first: lab-1 (port 50052)." in asked and 'name="wipe"' in asked

    deployment = held(lab_2, 50060)
    refused = admin.post("/nodes/actions/", {"action": "remove", "node": ["lab-2", "lab-1"], "confirmed": "1",
                                             "wipe": "1"})
    assert refused.status_code == 400 and not NodeAction.objects.exists()
    assert f"lab-2 holds layers of standin #{deployment} (ready): stop that deployment first. Nothing was started." \
        in refused.content.decode()
    assert refused.content.decode().count("checked") == 2, "the laptops stay ticked"


@pytest.mark.django_db
def test_it_starts_nothing_for_an_empty_or_busy_selection(admin):
    lab_1, lab_2 = laptops("lab-1", "lab-2")
    empty = admin.post("/nodes/actions/", {"action": "probe"})
    assert empty.status_code == 400 and "Choose at least one laptop. Nothing was started." in empty.content.decode()
    NodeAction.objects.create(node=lab_2, kind=ActionKind.PROBE, status=ActionStatus.RUNNING)
    busy = admin.post("/nodes/actions/", {"action": "install_runtime", "node": ["lab-1", "lab-2"]})
    assert "lab-2 is busy (probe running): wait for it to end. Nothing was started." in busy.content.decode()
    assert NodeAction.objects.count() == 1
    odd = admin.post("/nodes/actions/", {"action": "format_disk", "node": ["lab-1"]})
    assert odd.status_code == 400 and ("format_disk is not something the panel does to many laptops at once: choose "
                                       "probe, install_runtime, restart_rpc or remove.") in odd.content.decode()


@pytest.mark.django_db
def test_the_page_shows_a_selection_with_its_summary(admin):
    lab_10, lab_1, lab_2 = laptops("lab-10", "lab-1", "lab-2")
    done = [NodeAction.objects.create(node=node, kind=ActionKind.PROBE, status=ActionStatus.SUCCEEDED)
            for node in (lab_1, lab_2)]
    done.append(NodeAction.objects.create(node=lab_10, kind=ActionKind.PROBE, status=ActionStatus.FAILED,
                                          error="Cannot reach 192.0.2.10:22: timed out",
                                          progress={"unreachable": True}))
    page = admin.get(f"/nodes/?actions={','.join(str(a.pk) for a in done)},x,99999").content.decode()
    assert "Probe on 3 laptops" in page, page[page.find("<main"):page.find("<form")]
    assert "2 probed; 1 unreachable: lab-10." in page
    assert page.index("<strong>lab-1</strong>") < page.index("<strong>lab-2</strong>") < page.index(
        "<strong>lab-10</strong>")
    assert page.count(" checked>") == 3


def test_plain_users_cannot_act_on_laptops(client, bob):
    client.force_login(bob)
    assert client.post("/nodes/actions/", {"action": "probe", "node": ["x"]}).status_code == 403
