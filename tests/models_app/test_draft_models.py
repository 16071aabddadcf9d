"""A deployment's draft model by script and on its page (models_app/deploying/drafts.py): one cut from the model
itself is taken and shown, and so is one lacking a few tokens at its end (a model's padding); one with more
tokens, one of another vocabulary, one too big for the head's memory, one that does not exist and one still
checksumming are refused in words, changing nothing; a model drafting for a running deployment is not deleted
from under it."""

import pytest
from django.test import Client

from clusterpanel.accounts.models import ApiToken
from models_app.deploying import drafts
from models_app.library import removal
from models_app.library.adding import ensure_bundled, register_path
from models_app.models import Deployment, DeploymentStatus, GgufModel, ModelStatus
from models_app.planning.planner import Machine
from nodes.models import Node, NodeStatus
from tests.drafts import cut_draft, other_vocabulary
from tests.rows import HOST_KEY


@pytest.fixture
def admin(alice) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {ApiToken.issue(alice, 'tests')[1]}")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("drafts")


@pytest.fixture
def deployment(admin) -> Deployment:
    """The bundled model planned over three laptops (rows only: nothing runs)."""
    for n in (1, 2, 3):
        Node.objects.create(name=f"lab-{n}", host=f"192.0.2.{n}", username="lab", host_key=HOST_KEY,
                            usable_memory=4 << 30, speed_gb_s=10.0, status=NodeStatus.READY)
    plan = {"model": ensure_bundled().name, "nodes": ["lab-1", "lab-2", "lab-3"], "ctx": 1024, "slots": 2,
            "mode": "even"}
    made = admin.post("/api/deployments/", plan, "application/json")
    assert made.status_code in (201, 202), made.content
    return Deployment.objects.get(pk=made.json()["id"])


def test_a_cut_draft_is_taken_shown_and_carried_and_others_are_refused_in_words(admin, deployment, folder, client,
                                                                                 alice, monkeypatch):
    cut = register_path(cut_draft(folder), name="cut", checksum_now=True)
    other = register_path(other_vocabulary(folder), name="other", checksum_now=True)
    url = f"/api/deployments/{deployment.pk}/drafting/"

    GgufModel.objects.filter(pk=cut.pk).update(vocab_size=49152 + 1)
    larger = admin.post(url, {"draft_tokens": 6, "draft_model": "cut"}, "application/json").json()
    assert "cut's vocabulary has 49,153 tokens and smollm2-135m-instruct-q4_1's 49,152" in larger["error"], larger
    GgufModel.objects.filter(pk=cut.pk).update(vocab_size=49152 - 64)  # as a model padded to a round size is
    padded = admin.post(url, {"draft_tokens": 6, "draft_model": "cut"}, "application/json")
    assert padded.status_code == 200, "its tokens are the model's first ones: taken"
    GgufModel.objects.filter(pk=cut.pk).update(vocab_size=49152)
    admin.post(url, {"draft_tokens": 6, "draft_model": None}, "application/json")

    taken = admin.post(url, {"draft_tokens": 6, "draft_model": "cut"}, "application/json")
    assert taken.status_code == 200, taken.content
    assert taken.json()["draft_model"] == "cut" and taken.json()["draft_tokens"] == 6
    kept = admin.post(url, {"draft_tokens": 4}, "application/json").json()
    assert kept["draft_model"] == "cut", "left out: as it was"

    refused = admin.post(url, {"draft_tokens": 4, "draft_model": "other"}, "application/json").json()
    assert refused["field"] == "draft_model"
    assert refused["error"] == ("other's tokens are not smollm2-135m-instruct-q4_1's: a draft model must have the "
                                "same vocabulary."), refused
    missing = admin.post(url, {"draft_tokens": 4, "draft_model": "nowhere"}, "application/json").json()
    assert missing == {**missing, "field": "draft_model", "error": "There is no model named 'nowhere'."}
    GgufModel.objects.filter(pk=other.pk).update(status=ModelStatus.HASHING)
    hashing = admin.post(url, {"draft_tokens": 4, "draft_model": "other"}, "application/json").json()
    assert "is not ready (checksumming)" in hashing["error"]
    monkeypatch.setattr(drafts, "head_machine", lambda: Machine("head", 10 << 20, 5.0))
    again = admin.post(url, {"draft_tokens": 4, "draft_model": "cut"}, "application/json")
    assert again.status_code == 200, "the draft it has is not checked again: the head holds it already"
    admin.post(url, {"draft_tokens": 4, "draft_model": None}, "application/json")
    too_big = admin.post(url, {"draft_tokens": 4, "draft_model": "cut"}, "application/json").json()
    assert "MiB on the head for 2 slot(s) of 1,024 tokens; the head has 10 MiB free" in too_big["error"], too_big
    monkeypatch.undo()
    admin.post(url, {"draft_tokens": 4, "draft_model": "cut"}, "application/json")
    after = Deployment.objects.get(pk=deployment.pk)
    assert (after.draft_model_id, after.draft_tokens) == (cut.pk, 4), "refusals changed nothing"

    Deployment.objects.filter(pk=deployment.pk).update(status=DeploymentStatus.READY)
    with pytest.raises(removal.Refused, match=f"It drafts for deployment #{deployment.pk}"):
        removal.model_deletion(cut)

    client.force_login(alice)
    page = client.get(f"/models/deployments/{deployment.pk}/").content.decode()
    assert '<option value="cut" selected>cut on the head (' in page, "the draft, with what it holds on the head"
    client.post(f"/models/deployments/{deployment.pk}/drafting/", {"draft_tokens": "6", "draft_model": ""})
    assert Deployment.objects.get(pk=deployment.pk).draft_model is None, "the page's first choice: n-grams"
    nulled = admin.post(url, {"draft_tokens": 6, "draft_model": "cut"}, "application/json")
    assert nulled.status_code == 200
    assert admin.post(url, {"draft_tokens": 6, "draft_model": None}, "application/json").json()["draft_model"] is None
