"""A lab admin puts a model on call on its page or by script: an idle time of 0 or less, fewer than one replica, a
pool too small for the model (today's planner on the pool's measured memory, the numbers said) and more replicas
than the pool can hold are each refused in words, and nothing is saved. A model on call is listed asleep on the
Models page and in /api until a request wakes it. No laptops: they are rows with their memory set."""

import pytest
from django.test import Client

from clusterpanel.accounts.models import ApiToken
from models_app.library.adding import ensure_bundled, register_path
from models_app.models import OnCall
from models_app.oncall import service as oncall
from tests.drafts import cut_draft, other_vocabulary
from tests.oncall_rows import gguf, laptops, on_call
from tests.rows import client_for


@pytest.fixture
def admin(alice) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {ApiToken.issue(alice, 'tests')[1]}")


def refused(model, pool, **settings) -> str:
    with pytest.raises(oncall.OnCallError) as caught:
        on_call(model, pool, **settings)
    assert not OnCall.objects.exists(), "nothing is saved"
    return str(caught.value)


def test_it_refuses_an_idle_time_of_zero_or_less_and_fewer_than_one_replica(db):
    model, pool = gguf("small"), laptops(2)
    for idle in (0, -5):
        assert refused(model, pool, idle_minutes=idle) == (
            f"The idle time (minutes) must be a whole number from 1 to 10080, not {idle}.")
    assert refused(model, pool, replicas=0) == "Replicas must be a whole number from 1 to 16, not 0."
    assert "When laptops are short, choose wait or evict" in refused(model, pool, when_short="later")
    assert refused(model, []) == "Choose at least one laptop for its pool, or any ready laptop."


def test_a_pool_too_small_for_the_model_is_refused_with_the_numbers(db):
    said = refused(gguf("big", layers=16), laptops(1, gib=1.0))
    assert said.startswith("Its pool is too small for big: The model needs ")
    assert "GiB; the chosen machines have 1.0 GiB usable" in said and "GiB short" in said


def test_more_replicas_than_the_pool_can_hold_are_refused(db):
    model, pool = gguf("small"), laptops(2)
    said = refused(model, pool, replicas=3)
    assert said.startswith("Its pool holds 2 replicas of small at a context of 1024 tokens, not 3: replica 3 would "
                           "not fit on the laptops left.")
    assert on_call(model, pool, replicas=2).replicas == 2


def test_a_laptop_never_probed_cannot_be_in_a_pool(db):
    pool = laptops(2)
    pool[1].usable_memory = None
    pool[1].save()
    assert refused(gguf("small"), pool) == f"{pool[1].name} has not been probed yet, so its memory is not known; " \
                                           "probe it first."


def test_by_script_each_refusal_names_its_field_and_a_good_one_is_asleep(admin, bob, db):
    model, pool = gguf("small"), laptops(2)
    url = f"/api/models/{model.name}/on-call/"
    assert admin.get(url).status_code == 404
    for body, field in (({"idle_minutes": 0}, "idle_minutes"), ({"replicas": -1}, "replicas"),
                        ({"pool": [pool[0].name], "replicas": 2}, "replicas")):
        answer = admin.put(url, body, "application/json")
        assert answer.status_code == 400 and answer.json()["field"] == field, answer.json()
    nowhere = admin.put(url, {"pool": ["nowhere"]}, "application/json")
    assert nowhere.status_code == 400 and nowhere.json()["field"] == "pool", nowhere.json()
    assert admin.put(url, {"idle_minutes": "5"}, "application/json").status_code == 400  # a string is not a number
    assert not OnCall.objects.exists()
    made = admin.put(url, {"pool": [p.name for p in pool], "idle_minutes": 5, "ctx": 1024}, "application/json")
    assert made.status_code == 200, made.json()
    assert made.json() | {"events": []} == {"model": "small", "state": "asleep", "pool": [p.name for p in pool],
                                            "idle_minutes": 5, "replicas": 1, "ctx": 1024, "slots": 1,
                                            "when_short": "wait", "draft_tokens": 0, "draft_model": None,
                                            "events": []}
    listed = admin.get("/api/models/").json()["results"]
    assert [(m["name"], m["on_call"], m["state"]) for m in listed] == [("small", True, "asleep")]
    user = Client(HTTP_AUTHORIZATION=f"Bearer {ApiToken.issue(bob, 'tests')[1]}")
    assert user.put(url, {"idle_minutes": 3}, "application/json").status_code == 403
    assert admin.delete(url).json()["was_on_call"] is True and not OnCall.objects.exists()


def test_on_its_page_a_refusal_is_shown_on_the_form_and_a_good_one_listed_asleep(alice, db):
    model, pool = gguf("small"), laptops(1, gib=1.0)
    page = client_for(alice)
    form = {"any_laptop": "", "pool": [pool[0].pk], "idle_minutes": "0", "replicas": "1", "ctx": "1024",
            "slots": "1", "when_short": "wait"}
    answer = page.post(f"/models/{model.name}/on-call/", form)
    assert answer.status_code == 400 and b"The idle time (minutes) must be a whole number from 1" in answer.content
    big = gguf("big", layers=16)
    answer = page.post(f"/models/{big.name}/on-call/", {**form, "idle_minutes": "5"})
    assert answer.status_code == 400 and b"Its pool is too small for big" in answer.content
    assert not OnCall.objects.exists()
    answer = page.post(f"/models/{model.name}/on-call/", {**form, "idle_minutes": "5"})
    assert answer.status_code == 302
    assert b'<td class="on-call-state">asleep</td>' in page.get("/models/").content
    shown = page.get(f"/models/{model.name}/").content
    assert b'id="on-call-state">asleep</strong>' in shown and b"unloaded after 5 idle minutes" in shown
    page.post(f"/models/{model.name}/on-call/off/")
    assert not OnCall.objects.exists()


def test_a_draft_on_call_is_checked_as_a_deployment_s_and_carried_to_the_deployment_a_request_wakes(admin, db,
                                                                                                   tmp_path):
    model, pool = ensure_bundled(), laptops(2)
    register_path(cut_draft(tmp_path), name="cut", checksum_now=True)
    register_path(other_vocabulary(tmp_path), name="other", checksum_now=True)
    url = f"/api/models/{model.name}/on-call/"
    body = {"pool": [p.name for p in pool], "ctx": 1024, "draft_tokens": 6}
    for wrong, field in ((("draft_model", "other"), "draft_model"), (("draft_model", "nowhere"), "draft_model"),
                         (("draft_tokens", 33), "draft_tokens")):
        answer = admin.put(url, dict(body, **dict([wrong])), "application/json")
        assert answer.status_code == 400 and answer.json()["field"] == field, answer.json()
    assert not OnCall.objects.exists(), "nothing is saved"
    made = admin.put(url, {**body, "draft_model": "cut"}, "application/json").json()
    assert (made["draft_tokens"], made["draft_model"]) == (6, "cut")
    woken = oncall.waiting_deployment(model, OnCall.objects.get(model=model), "a request named it")
    assert (woken.draft_tokens, woken.draft_model.name) == (6, "cut"), "its deployments draft as it says"
