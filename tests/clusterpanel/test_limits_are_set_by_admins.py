"""Fair-use limits are set by lab admins, on the Users page and through /api/limits/: the lab's defaults, a
person's, a token's. Empty inherits; 0, a negative number or text is refused in words and nothing is saved;
people read their own limits, never set them."""

import json

from django.test import Client

from clusterpanel.accounts.models import ApiToken, LabLimits, User
from tests.rows import client_for

BAD = [("0", "1 or more"), ("-3", "1 or more"), ("ten", "whole number"), ("2.5", "whole number")]


def auth(user) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {ApiToken.issue(user, 'limits')[1]}"}


def patch(url: str, body: dict, headers: dict):
    return Client().patch(url, json.dumps(body), content_type="application/json", **headers)


def own(user: User) -> dict:
    user.refresh_from_db()
    return user.own_limits()


NONE = {"requests_per_minute": None, "concurrent_jobs": None, "tokens_per_day": None}


def test_the_users_page_refuses_a_bad_limit_in_words_saving_nothing(alice, bob):
    page = client_for(alice)
    for typed, words in BAD:
        answer = page.post(f"/users/{bob.pk}/limits/", {"requests_per_minute": "5", "concurrent_jobs": typed,
                                                         "tokens_per_day": ""})
        assert answer.status_code == 400 and words in answer.content.decode(), typed
        assert "Nothing was changed" in answer.content.decode()
        assert own(bob) == NONE, "not even the good one"


def test_the_users_page_sets_a_persons_the_labs_and_a_tokens_limits(alice, bob):
    page = client_for(alice)
    assert page.post("/users/limits/", {"requests_per_minute": "30", "concurrent_jobs": "",
                                        "tokens_per_day": "100000"}).status_code == 302
    assert LabLimits.current().own_limits() == {"requests_per_minute": 30, "concurrent_jobs": None,
                                                "tokens_per_day": 100000}
    assert page.post(f"/users/{bob.pk}/limits/", {"requests_per_minute": "", "concurrent_jobs": "2",
                                                  "tokens_per_day": ""}).status_code == 302
    assert own(bob) == {**NONE, "concurrent_jobs": 2}
    token = ApiToken.issue(bob, "nightly")[0]
    assert page.post(f"/users/tokens/{token.pk}/limits/", {"requests_per_minute": "5", "concurrent_jobs": "",
                                                           "tokens_per_day": ""}).status_code == 302
    token.refresh_from_db()
    assert token.requests_per_minute == 5
    shown = page.get("/users/").content.decode()
    assert 'placeholder="default 30"' in shown and 'name="concurrent_jobs" value="2"' in shown
    assert f'id="token-limits-{token.pk}"' in shown and "Limits of bob" in shown


def test_a_user_may_not_set_limits_on_the_page(bob):
    token = ApiToken.issue(bob, "mine")[0]
    for url in ("/users/limits/", f"/users/{bob.pk}/limits/", f"/users/tokens/{token.pk}/limits/"):
        assert client_for(bob).post(url, {"requests_per_minute": "1000"}).status_code == 403
    assert own(bob) == NONE and LabLimits.objects.count() == 0


def test_the_api_refuses_a_bad_limit_in_words_saving_nothing(alice, bob):
    headers = auth(alice)
    for sent in (0, -1, "ten", "5", 2.5, True, 10**13):
        answer = patch("/api/limits/users/bob/", {"requests_per_minute": 5, "tokens_per_day": sent}, headers)
        assert answer.status_code == 400, (sent, answer.content)
        assert answer.json()["field"] == "tokens_per_day" and "tokens per day" in answer.json()["error"].lower()
        assert own(bob) == NONE, sent


def test_the_api_sets_limits_that_inherit_the_labs_defaults(alice, bob):
    headers = auth(alice)
    defaults = patch("/api/limits/defaults/", {"requests_per_minute": 60, "tokens_per_day": 50000}, headers)
    assert defaults.status_code == 200 and defaults.json()["requests_per_minute"] == 60
    answer = patch("/api/limits/users/bob/", {"requests_per_minute": 10}, headers)
    assert answer.status_code == 200, answer.content
    assert answer.json()["in_force"] == {"requests_per_minute": {"value": 10, "source": "user"},
                                         "tokens_per_day": {"value": 50000, "source": "lab"}}
    cleared = patch("/api/limits/users/bob/", {"requests_per_minute": None}, headers).json()
    assert cleared["own"] == NONE and cleared["in_force"]["requests_per_minute"] == {"value": 60, "source": "lab"}
    token = ApiToken.issue(bob, "nightly")[0]
    made = patch(f"/api/limits/tokens/{token.pk}/", {"concurrent_jobs": 1}, headers)
    assert made.status_code == 200 and made.json()["own"]["concurrent_jobs"] == 1
    assert patch(f"/api/limits/tokens/{token.pk}/", {"bogus": 1}, headers).status_code == 400


def test_people_read_their_own_limits_and_set_none(alice, bob):
    headers = auth(bob)
    assert Client().get("/api/limits/users/bob/", **headers).status_code == 200
    assert Client().get("/api/limits/defaults/", **headers).status_code == 200
    assert Client().get("/api/limits/users/alice/", **headers).status_code == 404
    alices = ApiToken.issue(alice, "hers")[0]
    assert Client().get(f"/api/limits/tokens/{alices.pk}/", **headers).status_code == 404
    for url in ("/api/limits/defaults/", "/api/limits/users/bob/"):
        refused = patch(url, {"requests_per_minute": 1000}, headers)
        assert refused.status_code == 403 and "lab admins" in refused.json()["error"]
    assert own(bob) == NONE
