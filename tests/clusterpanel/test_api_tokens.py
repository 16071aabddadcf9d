"""API tokens: made on a page, shown once, kept only as a hash, revoked for good; bearer or 401."""

import sqlite3

from django.conf import settings
from django.db import connection
from django.test import Client

from clusterpanel.accounts.models import ApiToken
from tests.conftest import PASSWORD


def logged_in(user) -> Client:
    client = Client(enforce_csrf_checks=True)
    assert client.login(username=user.username, password=PASSWORD)
    return client


def make_token(client: Client, name: str = "eval script") -> str:
    client.get("/account/tokens/")
    page = client.post("/account/tokens/", {"name": name, "csrfmiddlewaretoken": client.cookies["csrftoken"].value})
    assert page.status_code == 200
    return page.context["key"]


def database_bytes() -> bytes:
    connection.close()  # everything written is in the file
    name = settings.DATABASES["default"]["NAME"]
    with sqlite3.connect(name) as db:
        return "\n".join(str(row) for row in db.iterdump()).encode()


def test_it_shows_a_new_token_once_and_keeps_only_its_hash(transactional_db, bob):
    client = logged_in(bob)
    key = make_token(client)
    assert key.startswith("cp_") and len(key) > 40
    token = ApiToken.objects.get(user=bob)
    assert token.prefix == key[:10] and token.digest != key and key not in token.digest
    listing = client.get("/account/tokens/").content.decode()
    assert "eval script" in listing and token.prefix in listing and key not in listing
    assert key.encode() not in database_bytes(), "the token itself is stored nowhere"


def test_it_authenticates_a_bearer_token_and_notes_when_it_was_used(db, bob):
    key = ApiToken.issue(bob, "script")[1]
    answer = Client().get("/api/jobs/", HTTP_AUTHORIZATION=f"Bearer {key}")
    assert answer.status_code == 200 and answer.json()["results"] == []
    assert ApiToken.objects.get(user=bob).last_used is not None


def test_it_refuses_a_revoked_token_with_401(db, bob):
    client = logged_in(bob)
    key = make_token(client)
    token = ApiToken.objects.get(user=bob)
    revoked = client.post(f"/account/tokens/{token.pk}/revoke/",
                          {"csrfmiddlewaretoken": client.cookies["csrftoken"].value})
    assert revoked.status_code == 302 and not ApiToken.objects.exists()
    for url in ("/api/jobs/", "/v1/models"):
        answer = Client().get(url, HTTP_AUTHORIZATION=f"Bearer {key}")
        assert answer.status_code == 401 and "revoked" in str(answer.json()["error"])


def test_it_answers_401_json_to_missing_or_malformed_tokens(db):
    for headers in ({}, {"HTTP_AUTHORIZATION": "Bearer"}, {"HTTP_AUTHORIZATION": "Basic Ym9iOnB3"},
                    {"HTTP_AUTHORIZATION": "Bearer cp_not-a-real-token"}):
        for url in ("/api/jobs/", "/api/deployments/", "/v1/models"):
            answer = Client().get(url, **headers)
            assert answer.status_code == 401, (url, headers)
            assert answer["Content-Type"] == "application/json"
    openai = Client().post("/v1/chat/completions", "{}", content_type="application/json").json()
    assert openai["error"]["code"] == "invalid_api_key" and openai["error"]["type"] == "invalid_request_error"


def test_it_lets_a_browser_session_use_the_rest_api_but_checks_csrf_on_posts(db, bob):
    client = logged_in(bob)
    assert client.get("/api/jobs/").status_code == 200
    refused = client.post("/api/jobs/", {}, content_type="application/json")
    assert refused.status_code == 403 and "CSRF" in refused.json()["error"]
    assert client.get("/v1/models").status_code == 401, "the OpenAI API takes tokens only"


def test_a_user_revokes_only_their_own_tokens_and_a_lab_admin_anyones(db, alice, bob):
    admins = ApiToken.issue(alice, "alice script")[0]
    bobs = ApiToken.issue(bob, "bob script")[0]
    client = logged_in(bob)
    client.get("/account/tokens/")
    answer = client.post(f"/account/tokens/{admins.pk}/revoke/",
                         {"csrfmiddlewaretoken": client.cookies["csrftoken"].value})
    assert answer.status_code == 404 and ApiToken.objects.filter(pk=admins.pk).exists()
    assert "alice script" not in client.get("/account/tokens/").content.decode()

    client = logged_in(alice)
    page = client.get("/account/tokens/").content.decode()
    assert "Everyone else&#x27;s tokens" in page or "Everyone else's tokens" in page
    assert "bob script" in page and "<td>bob</td>" in page
    csrf = {"csrfmiddlewaretoken": client.cookies["csrftoken"].value}
    answer = client.post(f"/account/tokens/{bobs.pk}/revoke/", csrf, follow=True)
    assert "Token “bob script” of bob revoked" in answer.content.decode()
    assert not ApiToken.objects.filter(pk=bobs.pk).exists()


def test_the_nav_links_the_tokens_page(db, bob):
    assert 'href="/account/tokens/"' in logged_in(bob).get("/", follow=True).content.decode()
