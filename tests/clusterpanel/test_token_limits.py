"""A token acts with its owner's role and its own limits: a read-only one only reads, an expired or revoked one
gets 401, on the REST API and the OpenAI-compatible one alike. Tokens are made and revoked on the page or by
script; a lab admin sees and revokes everyone's, a user only their own."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from clusterpanel.accounts.models import ApiToken
from tests.clusterpanel.test_api_tokens import logged_in


def auth(key: str) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {key}"}


def test_a_read_only_token_reads_but_changes_nothing(db, bob):
    key = ApiToken.issue(bob, "dashboard", read_only=True)[1]
    client = Client()
    assert client.get("/api/jobs/", **auth(key)).status_code == 200
    assert client.get("/api/tokens/", **auth(key)).status_code == 200
    for answer in (client.post("/api/jobs/", {"prompt": "Hi", "kind": "completion"}, "application/json", **auth(key)),
                   client.post("/api/tokens/", {"name": "more"}, "application/json", **auth(key)),
                   client.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}]},
                               "application/json", **auth(key))):
        assert answer.status_code == 403, answer.content
        assert "read-only" in str(answer.json()["error"])
    assert ApiToken.objects.count() == 1


def test_an_expired_token_gets_401_saying_so(db, bob):
    token, key = ApiToken.issue(bob, "old script", expires=timezone.now() + timedelta(days=1))
    assert Client().get("/api/jobs/", **auth(key)).status_code == 200
    ApiToken.objects.filter(pk=token.pk).update(expires=timezone.now() - timedelta(seconds=1))
    for url in ("/api/jobs/", "/v1/models"):
        answer = Client().get(url, **auth(key))
        assert answer.status_code == 401 and "expired" in str(answer.json()["error"]), answer.content


def test_tokens_by_script_made_listed_and_revoked_with_roles(db, alice, bob):
    bobs = Client()
    made = bobs.post("/api/tokens/", {"name": "nightly", "read_only": True, "expires_in_days": 30},
                     "application/json", **auth(ApiToken.issue(bob, "first")[1]))
    assert made.status_code == 201, made.content
    new = made.json()
    assert new["key"].startswith("cp_") and new["read_only"] and new["user"] == "bob"
    assert timedelta(days=29) < ApiToken.objects.get(pk=new["id"]).expires - timezone.now() <= timedelta(days=30)
    assert "key" not in bobs.get("/api/tokens/", **auth(new["key"])).json()["results"][0], "the key is shown once"

    admins = ApiToken.issue(alice, "admin's")[0]
    bob_key = ApiToken.issue(bob, "again")[1]
    assert bobs.get("/api/tokens/?all=1", **auth(bob_key)).status_code == 403
    assert bobs.delete(f"/api/tokens/{admins.pk}/", **auth(bob_key)).status_code == 404, "not confirmed"

    alice_key = ApiToken.issue(alice, "admin script")[1]
    everyone = Client().get("/api/tokens/?all=1", **auth(alice_key)).json()
    assert {t["name"] for t in everyone["results"]} >= {"nightly", "first", "again", "admin's"}
    assert Client().delete(f"/api/tokens/{new['id']}/", **auth(alice_key)).status_code == 204
    assert Client().get("/api/jobs/", **auth(new["key"])).status_code == 401, "revoked by a lab admin"


@pytest.mark.parametrize(("body", "field"), [
    ({}, "name"), ({"name": ""}, "name"), ({"name": "x" * 101}, "name"), ({"name": "a\x00b"}, "name"),
    ({"name": "ok", "expires_in_days": 0}, "expires_in_days"), ({"name": "ok", "expires_in_days": 10**6},
                                                                "expires_in_days"),
    ({"name": "ok", "read_only": "maybe"}, "read_only"), ({"name": "ok", "colour": "red"}, "colour"),
])
def test_a_bad_token_request_is_refused_naming_the_field(db, bob, body, field):
    answer = Client().post("/api/tokens/", body, "application/json", **auth(ApiToken.issue(bob, "first")[1]))
    assert answer.status_code == 400 and answer.json()["field"] == field, answer.content
    assert ApiToken.objects.count() == 1


def test_the_page_makes_read_only_tokens_that_end_and_refuses_a_made_up_end(db, bob):
    client = logged_in(bob)
    client.get("/account/tokens/")
    csrf = client.cookies["csrftoken"].value
    page = client.post("/account/tokens/", {"name": "grafana", "read_only": "1", "expires_in_days": "90",
                                            "csrfmiddlewaretoken": csrf})
    token = ApiToken.objects.get(name="grafana")
    assert token.read_only and timedelta(days=89) < token.expires - timezone.now() <= timedelta(days=90)
    assert "read</td>" in page.content.decode() and "in 2\xa0months" in page.content.decode()
    refused = client.post("/account/tokens/", {"name": "x", "expires_in_days": "5000", "csrfmiddlewaretoken": csrf})
    assert refused.status_code == 400 and "Choose when the token ends" in refused.content.decode()
    assert ApiToken.objects.count() == 1
