"""One model spans at most nodes.runtime.bundle.MAX_LAPTOPS laptops (llama.cpp's devices, as built). Offered more
ready laptops than that, the planner plans over the fastest within the limit and says in words which it left
out, on the page, in the API and in `manage.py plan`; asked explicitly for more, it refuses in words and saves
nothing."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from clusterpanel.accounts.models import ApiToken
from models_app.models import Deployment, GgufModel
from nodes.models import Node, NodeStatus
from nodes.runtime import bundle as runtime
from tests.jobs.standins import ready_deployment
from tests.rows import HOST_KEY, client_for

GB = 1 << 30


@pytest.fixture
def admin(alice) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {ApiToken.issue(alice, 'tests')[1]}")


def laptops(count: int) -> list[Node]:
    """Ready laptops, every third one slow: lab-3, lab-6, … are the ones to leave out first."""
    return [Node.objects.create(name=f"lab-{n}", host=f"192.0.2.{n}", username="lab", host_key=HOST_KEY,
                                usable_memory=4 * GB, speed_gb_s=2.0 if n % 3 == 0 else 10.0,
                                status=NodeStatus.READY) for n in range(1, count + 1)]


def model() -> GgufModel:
    standin = ready_deployment().model
    Deployment.objects.all().delete()
    GgufModel.objects.filter(pk=standin.pk).update(n_layer=80, layer_bytes=[20 << 20] * 80)
    return GgufModel.objects.get(pk=standin.pk)


def test_offered_more_it_plans_over_the_fastest_within_the_limit_and_says_so(alice, admin, monkeypatch):
    monkeypatch.setattr(runtime, "MAX_LAPTOPS", 4)
    the_model, _ = model(), laptops(6)
    said = "llama.cpp as built here runs one model over at most 4 laptops; left out (the slowest, then those " \
           "with least memory): lab-3, lab-6."
    answer = admin.post("/api/plans/", {"model": "standin", "ctx": 512, "mode": "even"}, "application/json").json()
    assert answer["nodes"] == ["lab-1", "lab-2", "lab-4", "lab-5"] and answer["left_out"] == ["lab-3", "lab-6"]
    assert answer["left_out_said"] == said
    assert len([s for s in answer["modes"]["even"]["stages"] if s["count"]]) == 4
    assert answer["modes"]["fastest"]["tensor_split"], "the fastest mode plans too"
    page = client_for(alice).get("/models/plan/", {"model": the_model.pk, "ctx": 512, "mode": "even"})
    assert said in page.content.decode() and len(page.context["chosen"]["stages"]) == 5
    out = StringIO()
    call_command("plan", "standin", "--ctx", "512", "--mode", "even", stdout=out)
    assert said in out.getvalue() and "lab-5" in out.getvalue() and "lab-6 " not in out.getvalue()


def test_asked_for_more_it_refuses_in_words_and_saves_nothing(alice, admin, monkeypatch):
    monkeypatch.setattr(runtime, "MAX_LAPTOPS", 4)
    the_model, nodes = model(), laptops(5)
    refused = admin.post("/api/plans/", {"model": "standin", "nodes": [n.name for n in nodes], "ctx": 512},
                         "application/json")
    said = "llama.cpp as built here runs one model over at most 4 laptops, and 5 were chosen: choose at most 4."
    assert refused.status_code == 400 and refused.json()["error"] == said and refused.json()["field"] == "nodes"
    made = admin.post("/api/deployments/", {"model": "standin", "nodes": [n.name for n in nodes], "ctx": 512},
                      "application/json")
    assert made.status_code == 400 and "at most 4 laptops" in made.json()["error"]
    client = client_for(alice)
    page = client.get("/models/plan/", {"model": the_model.pk, "nodes": [n.pk for n in nodes], "ctx": 512})
    assert said in page.content.decode() and "results" not in page.context
    posted = client.post("/models/deployments/new/", {"model": the_model.pk, "nodes": [n.pk for n in nodes],
                                                      "ctx": 512, "mode": "even", "slots": 1}, follow=True)
    assert "at most 4 laptops" in posted.content.decode()
    with pytest.raises(CommandError, match="at most 4 laptops, and 5 were chosen"):
        call_command("plan", "standin", "--nodes", ",".join(n.name for n in nodes), stdout=StringIO())
    assert not Deployment.objects.exists()


def test_at_the_real_limit_it_plans_over_64_of_70_laptops(admin):
    assert runtime.MAX_LAPTOPS == 64
    model()
    nodes = laptops(70)
    answer = admin.post("/api/plans/", {"model": "standin", "ctx": 512, "mode": "even"}, "application/json").json()
    slow_last = ["lab-54", "lab-57", "lab-60", "lab-63", "lab-66", "lab-69"]  # 23 slow: 17 of them kept
    assert len(answer["nodes"]) == 64 and answer["left_out"] == slow_last
    assert len([s for s in answer["modes"]["even"]["stages"] if s["count"]]) == 64
    assert answer["nodes"][:12] == [f"lab-{n}" for n in range(1, 13)], "in pipeline order, numbers counted"
    refused = admin.post("/api/plans/", {"model": "standin", "nodes": [n.name for n in nodes[:65]], "ctx": 512},
                         "application/json")
    assert refused.status_code == 400 and "at most 64 laptops, and 65 were chosen" in refused.json()["error"]
