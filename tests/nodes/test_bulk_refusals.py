"""Acting on many laptops by script is all or nothing: an unknown action, an empty selection, a laptop named
twice or not at all, a laptop already busy, or (for a removal) one a deployment holds is refused in words,
with a 400 naming the field, and nothing is started. Laptops are listed as people count them."""

import pytest
from django.test import Client

from clusterpanel.accounts.models import ApiToken
from models_app.models import DeploymentStage, DeploymentStatus
from nodes.models import ActionKind, ActionStatus, Node, NodeAction
from tests.jobs.standins import ready_deployment
from tests.rows import HOST_KEY


def script(user) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {ApiToken.issue(user, 'tests')[1]}")


def laptops(*names: str) -> list[Node]:
    return [Node.objects.create(name=name, host=f"192.0.2.{i + 10}", username="lab", host_key=HOST_KEY)
            for i, name in enumerate(names)]


def refused(client: Client, body: dict) -> dict:
    before = NodeAction.objects.count()
    answer = client.post("/api/nodes/actions/", body, content_type="application/json")
    assert answer.status_code == 400, answer.content
    assert NodeAction.objects.count() == before, "nothing was started"
    return answer.json()


@pytest.mark.django_db
def test_it_refuses_a_malformed_selection_in_words(alice):
    laptops("hid5-1", "hid5-2")
    client = script(alice)
    unknown_action = refused(client, {"action": "reboot", "nodes": ["hid5-1"]})
    assert unknown_action["field"] == "action" and "'probe'" in unknown_action["error"], unknown_action
    empty = refused(client, {"action": "probe", "nodes": []})
    assert empty == {"error": "Choose at least one laptop. Nothing was started.", "field": "nodes"}
    twice = refused(client, {"action": "probe", "nodes": ["hid5-2", "hid5-1", "hid5-2"]})
    assert twice["error"] == "hid5-2 is named more than once: name each laptop once. Nothing was started."
    ghosts = refused(client, {"action": "probe", "nodes": ["hid5-1", "hid5-10", "ghost", "hid5-9"]})
    assert ghosts == {"error": "No laptop is named ghost, hid5-9, hid5-10. Nothing was started.", "field": "nodes"}
    wipe = refused(client, {"action": "probe", "nodes": ["hid5-1"], "wipe": True})
    assert wipe["field"] == "wipe"
    assert refused(client, {"action": "probe", "nodes": [1, 2]})["field"] == "nodes[0]"
    assert refused(client, {"action": "probe", "nodes": ["hid5-1"], "force": True})["field"] == "force"


@pytest.mark.django_db
def test_it_refuses_busy_laptops_and_names_each(alice):
    one, two, three = laptops("hid5-1", "hid5-2", "hid5-10")
    NodeAction.objects.create(node=three, kind=ActionKind.INSTALL_RUNTIME, status=ActionStatus.RUNNING)
    NodeAction.objects.create(node=one, kind=ActionKind.PROBE)
    NodeAction.objects.create(node=two, kind=ActionKind.PROBE, status=ActionStatus.FAILED)
    busy = refused(script(alice), {"action": "probe", "nodes": ["hid5-10", "hid5-2", "hid5-1"]})
    assert busy == {"error": "hid5-1 is busy (probe queued); hid5-10 is busy (install runtime running): wait for "
                             "them to end. Nothing was started.", "field": "nodes"}


@pytest.mark.django_db
def test_it_refuses_to_remove_a_laptop_a_running_deployment_holds(alice):
    free, held = laptops("lab-1", "lab-2")
    deployment = ready_deployment(status=DeploymentStatus.READY)
    DeploymentStage.objects.create(deployment=deployment, position=0, node=held, first_layer=0, layer_count=1,
                                   memory={})
    answer = refused(script(alice), {"action": "remove", "nodes": ["lab-1", "lab-2"], "wipe": True})
    assert answer["error"] == (f"lab-2 holds layers of standin #{deployment.pk} (ready): stop that deployment "
                               "first. Nothing was started.")
    assert Node.objects.filter(pk__in=[free.pk, held.pk]).count() == 2


@pytest.mark.django_db
def test_it_keeps_plain_users_out(alice, bob):
    laptops("lab-1")
    answer = script(bob).post("/api/nodes/actions/", {"action": "probe", "nodes": ["lab-1"]},
                              content_type="application/json")
    assert answer.status_code == 403 and not NodeAction.objects.exists()
    assert script(bob).get("/api/nodes/actions/?ids=1").status_code == 403


@pytest.mark.django_db
def test_it_lists_laptops_in_natural_order_page_by_page(alice):
    laptops("hid5-10", "hid5-2", "hid5-1", "Hid5-3", "lab-1")
    client = script(alice)
    names = [node["name"] for node in client.get("/api/nodes/").json()["results"]]
    assert names == ["hid5-1", "hid5-2", "Hid5-3", "hid5-10", "lab-1"]
    page = client.get("/api/nodes/?limit=2&offset=2").json()
    assert [node["name"] for node in page["results"]] == ["Hid5-3", "hid5-10"] and page["count"] == 5
    assert page["next"].endswith("offset=4")


@pytest.mark.django_db
def test_it_refuses_to_follow_what_does_not_exist(alice):
    client = script(alice)
    assert client.get("/api/nodes/actions/?ids=4,x").json()["field"] == "ids"
    assert client.get("/api/nodes/actions/").json()["field"] == "ids"
    missing = client.get("/api/nodes/actions/?ids=999999")
    assert missing.status_code == 404 and missing.json()["error"] == "There is no action 999999."


@pytest.mark.django_db
def test_no_laptop_can_be_named_like_the_selection_page(alice):
    client = Client()
    client.force_login(alice)
    answer = client.post("/nodes/add/", {"name": "actions", "host": "192.0.2.1", "username": "lab",
                                          "connection": "tunnel", "install_dir": "~/.clusterpanel",
                                          "auth": "panel_key"})
    assert "The name actions is taken by another page of the panel" in answer.content.decode()
