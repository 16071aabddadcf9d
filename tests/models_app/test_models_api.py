"""Models, plans and deployments by script, with the pages' own rules: the library read, renamed and deleted
(refused while deployed); a plan in every mode with the Plan page's numbers and refusals; a deployment made
from a plan, stopped, verified only when ready, made the default, redeployed and removed. A plain user reads
deployments and nothing else here."""

import pytest
from django.test import Client

from clusterpanel.accounts.models import ApiToken
from models_app.models import Deployment, DeploymentStatus, GgufModel
from nodes.models import Node, NodeStatus
from tests.jobs.standins import ready_deployment
from tests.rows import HOST_KEY

GB = 1 << 30


@pytest.fixture
def admin(alice) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {ApiToken.issue(alice, 'tests')[1]}")


@pytest.fixture
def user(bob) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {ApiToken.issue(bob, 'tests')[1]}")


@pytest.fixture
def lab(db) -> GgufModel:
    for n in (1, 2, 3):
        Node.objects.create(name=f"lab-{n}", host=f"192.0.2.{n}", username="lab", host_key=HOST_KEY,
                            usable_memory=4 * GB, speed_gb_s=10.0, status=NodeStatus.READY)
    model = ready_deployment().model
    GgufModel.objects.filter(pk=model.pk).update(n_layer=6, layer_bytes=[50 << 20] * 6)
    return GgufModel.objects.get(pk=model.pk)


PLAN = {"model": "standin", "nodes": ["lab-1", "lab-2", "lab-3"], "ctx": 512, "slots": 2, "mode": "even",
        "order": ["lab-3"]}


def test_the_library_by_script(admin, user, lab):
    listed = admin.get("/api/models/").json()["results"]
    assert [m["name"] for m in listed] == ["standin"] and listed[0]["layers"] == 6
    detail = admin.get("/api/models/standin/").json()
    deployed = list(Deployment.objects.filter(model=lab).values_list("pk", flat=True))
    assert detail["layer_bytes"] == [50 << 20] * 6 and detail["deployments"] == deployed and len(deployed) == 1
    assert user.get("/api/models/").status_code == 403
    refused = admin.delete("/api/models/standin/")
    assert refused.status_code == 409 and "It is deployed" in refused.json()["error"]
    assert admin.patch("/api/models/standin/", {"name": "!!!"}, "application/json").json()["field"] == "name"
    renamed = admin.patch("/api/models/standin/", {"name": "Small One"}, "application/json")
    assert renamed.status_code == 200 and renamed.json()["name"] == "small-one"
    Deployment.objects.update(status=DeploymentStatus.STOPPED)
    deleted = admin.delete("/api/models/small-one/")
    assert deleted.status_code == 200 and "small-one leaves the library." in deleted.json()["consequences"]
    assert not GgufModel.objects.exists()
    missing = admin.post("/api/models/", {"path": "/nonexistent/model.gguf"}, "application/json")
    assert missing.status_code == 400 and missing.json()["field"] == "path"


def test_a_plan_by_script_has_every_mode_and_the_pages_refusals(admin, user, lab):
    answer = admin.post("/api/plans/", PLAN, "application/json")
    assert answer.status_code == 200, answer.content
    plan = answer.json()
    assert plan["chosen"] == "even" and plan["nodes"] == ["lab-3", "lab-1", "lab-2"]
    assert set(plan["modes"]) == {"fastest", "memory", "even"}
    even = plan["modes"]["even"]
    assert [s["machine"] for s in even["stages"][1:]] == ["lab-3", "lab-1", "lab-2"]
    assert sum(s["count"] for s in even["stages"]) >= 6 and "2 people at once" in plan["people_at_once"]
    for body, field, status in [({**PLAN, "model": "nope"}, "model", 404), ({**PLAN, "nodes": ["lab-9"]}, "nodes", 404),
                                ({**PLAN, "ctx": 10}, "ctx", 400), ({**PLAN, "slots": 99}, "slots", 400),
                                ({**PLAN, "order": ["lab-1", "lab-1"]}, "order", 400),
                                ({**PLAN, "mode": "random"}, "mode", 400), ({**PLAN, "ctx": "512"}, "ctx", 400)]:
        refused = admin.post("/api/plans/", body, "application/json")
        assert (refused.status_code, refused.json()["field"]) == (status, field), refused.content
    assert user.post("/api/plans/", PLAN, "application/json").status_code == 403


def test_a_deployment_by_script_from_plan_to_removal(admin, user, lab):
    made = admin.post("/api/deployments/", PLAN, "application/json")
    assert made.status_code == 202, made.content
    new = made.json()
    assert new["status"] == "planned" and [s["laptop"] for s in new["stages"]] == ["lab-3", "lab-1", "lab-2"]
    assert new["events"] == f"/api/deployments/{new['id']}/events/"
    assert new["id"] in [d["id"] for d in user.get("/api/deployments/").json()["results"]], "everyone lists them"
    assert user.get(f"/api/deployments/{new['id']}/").status_code == 403, "their laptops and servers are admins'"
    for refused in (user.post(f"/api/deployments/{new['id']}/stop/"), user.post("/api/deployments/", PLAN,
                                                                             "application/json")):
        assert refused.status_code == 403

    verify = admin.post(f"/api/deployments/{new['id']}/verify/")
    assert verify.status_code == 409 and "Only a ready deployment" in verify.json()["error"]
    assert admin.post(f"/api/deployments/{new['id']}/default/").status_code == 409, "it takes no jobs yet"
    Deployment.objects.filter(pk=new["id"]).update(status=DeploymentStatus.READY)  # as if prepared
    assert admin.post(f"/api/deployments/{new['id']}/default/").json()["is_default"]
    assert admin.delete(f"/api/deployments/{new['id']}/").status_code == 409, "not while it holds laptops"
    stopped = admin.post(f"/api/deployments/{new['id']}/stop/")
    assert stopped.status_code == 200 and stopped.json()["status"] == "stopped"
    assert admin.post(f"/api/deployments/{new['id']}/stop/").status_code == 409, "already stopped"

    again = admin.post(f"/api/deployments/{new['id']}/again/")
    assert again.status_code == 202 and again.json()["id"] != new["id"] and again.json()["is_default"]
    assert admin.delete(f"/api/deployments/{new['id']}/").status_code == 204
    assert not Deployment.objects.filter(pk=new["id"]).exists()
    assert admin.get("/api/deployments/99999999999999999999/").status_code == 404


def test_drafting_by_script_and_on_its_page_keeps_to_its_range_and_carries_to_a_redeploy(admin, user, lab, client,
                                                                                        alice):
    made = admin.post("/api/deployments/", PLAN, "application/json").json()
    url = f"/api/deployments/{made['id']}/drafting/"
    assert made["draft_tokens"] == 0, "off unless asked"
    on = admin.post(url, {"draft_tokens": 6}, "application/json")
    assert on.status_code == 200 and on.json()["draft_tokens"] == 6
    for wrong in (33, -1, "6", 2.5, None, True):
        refused = admin.post(url, {"draft_tokens": wrong}, "application/json")
        assert refused.status_code in (400, 422), (wrong, refused.content)
    assert admin.post(url, {"draft_tokens": 99}, "application/json").json()["field"] == "draft_tokens"
    assert "from 0 (no drafting) to 32" in admin.post(url, {"draft_tokens": 99}, "application/json").json()["error"]
    assert user.post(url, {"draft_tokens": 2}, "application/json").status_code == 403
    assert Deployment.objects.get(pk=made["id"]).draft_tokens == 6, "refusals changed nothing"
    again = admin.post(f"/api/deployments/{made['id']}/again/").json()
    assert again["draft_tokens"] == 6, "a redeploy drafts as the deployment it replaces"

    client.force_login(alice)
    page = f"/models/deployments/{again['id']}/"
    assert 'name="draft_tokens"' in client.get(page).content.decode()
    client.post(f"/models/deployments/{again['id']}/drafting/", {"draft_tokens": "abc"})
    assert Deployment.objects.get(pk=again["id"]).draft_tokens == 6
    assert "Drafting is unchanged" in client.get(page).content.decode()
    client.post(f"/models/deployments/{again['id']}/drafting/", {"draft_tokens": "0"})
    assert Deployment.objects.get(pk=again["id"]).draft_tokens == 0
