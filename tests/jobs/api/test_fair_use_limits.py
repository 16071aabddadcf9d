"""Over a limit, a request for an answer is refused with 429 and when to come again: at the configured count of
requests per minute, concurrent jobs and tokens per day, on /api/jobs/, /v1/ (in OpenAI's shape) and the chat
page (in words); a token's limits hold on top of its owner's, and the lab's defaults for whoever has none."""

import json
import math
import time

import pytest
from django.test import Client

from clusterpanel.accounts.models import ApiToken, LabLimits
from jobs.models import Batch, Conversation, Job, JobKind, JobStatus
from jobs.queue import admission, ratewindow, stream
from tests.conftest import free_port
from tests.jobs.standins import ended_job
from tests.rows import client_for

pytestmark = pytest.mark.timeout(60)  # a request let through by mistake on /v1 would wait for an engine
CHAT = {"messages": [{"role": "user", "content": "Hi"}]}


@pytest.fixture(autouse=True)
def empty_windows():
    """Each test's per-minute windows start empty (ids repeat across tests' databases)."""
    store = stream.store()
    for key in store.scan_iter("limits:rpm:*"):
        store.delete(key)


def key_of(user, name="tests") -> tuple[ApiToken, dict]:
    token, key = ApiToken.issue(user, name)
    return token, {"HTTP_AUTHORIZATION": f"Bearer {key}"}


def ask(headers: dict, url: str = "/api/jobs/", body: dict | None = None):
    return Client().post(url, json.dumps(body or CHAT), content_type="application/json", **headers)


def limit(target, **values) -> None:
    for name, value in values.items():
        setattr(target, name, value)
    target.save()


def test_it_refuses_the_request_past_the_per_minute_limit_and_says_when(ready, bob):
    limit(bob, requests_per_minute=3)
    _, headers = key_of(bob)
    assert [ask(headers).status_code for _ in range(3)] == [201, 201, 201]
    refused = ask(headers)
    assert refused.status_code == 429, refused.content
    assert 58 <= int(refused["Retry-After"]) <= 60
    assert "Your limit is 3 requests per minute" in refused.json()["error"]
    assert Job.objects.count() == 3, "a refused request queues nothing"


def test_retry_after_is_when_the_oldest_request_leaves_the_minute(ready, bob):
    limit(bob, requests_per_minute=2)
    _, headers = key_of(bob)
    store = stream.store()
    seconds, micro = store.time()  # the window's clock is Redis's
    now = seconds + micro / 1e6
    window = ratewindow.key(f"user:{bob.pk}")
    store.zadd(window, {"first": now - 45, "second": now - 30})
    asked = time.monotonic()
    refused = ask(headers)
    took = time.monotonic() - asked
    assert refused.status_code == 429, refused.content
    assert math.ceil(15 - took) <= int(refused["Retry-After"]) <= 15, "the first leaves the minute 15 s from now"
    store.zadd(window, {"first": now - 61})  # the oldest has left the minute: there is room for one
    assert ask(headers).status_code == 201
    assert ask(headers).status_code == 429


def test_it_refuses_past_the_concurrent_limit_but_not_for_batch_lines(ready, bob):
    limit(bob, concurrent_jobs=1)
    _, headers = key_of(bob)
    batch = Batch.objects.create(user=bob, deployment=ready, name="b", input_format="jsonl")
    Job.objects.create(kind=JobKind.BATCH_ITEM, deployment=ready, user=bob, batch=batch, line=1)
    assert ask(headers).status_code == 201, "a waiting batch line is not one of the concurrent jobs"
    refused = ask(headers)
    assert refused.status_code == 429 and refused["Retry-After"] == str(admission.CONCURRENT_RETRY_S)
    assert "1 concurrent job" in refused.json()["error"] and "a guess" in refused.json()["error"]
    Job.objects.filter(batch__isnull=True).update(status=JobStatus.SUCCEEDED)
    assert ask(headers).status_code == 201, "once it has ended, the next may come"


def test_it_refuses_past_the_tokens_of_the_day_until_midnight_utc(ready, bob):
    limit(bob, tokens_per_day=100)
    _, headers = key_of(bob)
    ended_job(ready, bob, prompt=60, completion=39)
    assert ask(headers).status_code == 201, "99 of 100 spent"
    ended_job(ready, bob, prompt=1, completion=0)
    refused = ask(headers)
    assert refused.status_code == 429, refused.content
    assert abs(int(refused["Retry-After"]) - admission.until_midnight()) <= 2
    assert "100 tokens per day" in refused.json()["error"] and "midnight UTC" in refused.json()["error"]


def test_v1_answers_in_openais_shape_before_anything_is_queued(ready, bob):
    limit(bob, concurrent_jobs=1, tokens_per_day=10)
    _, headers = key_of(bob)
    Job.objects.create(kind=JobKind.CHAT, deployment=ready, user=bob)
    refused = ask(headers, "/v1/chat/completions")
    assert refused.status_code == 429 and refused["Retry-After"] == str(admission.CONCURRENT_RETRY_S)
    error = refused.json()["error"]
    assert error["type"] == "requests" and error["code"] == "rate_limit_exceeded" and error["param"] is None
    Job.objects.update(status=JobStatus.SUCCEEDED)
    ended_job(ready, bob, prompt=5, completion=5)
    refused = ask(headers, "/v1/completions", {"prompt": "Once"})
    assert refused.status_code == 429 and refused.json()["error"]["type"] == "tokens", refused.content
    assert Job.objects.filter(status=JobStatus.QUEUED).count() == 0


def test_the_chat_page_says_when_the_user_may_ask_again(ready, bob):
    limit(bob, requests_per_minute=1)
    conversation = Conversation.objects.create(user=bob, deployment=ready)
    page = client_for(bob)

    def send(text: str):
        return page.post(f"/chat/{conversation.pk}/send/", json.dumps({"text": text, "deployment": ready.pk}),
                         content_type="application/json")

    assert send("Hi").status_code == 200
    Job.objects.update(status=JobStatus.SUCCEEDED)  # the answer came
    refused = send("Again")
    assert refused.status_code == 429 and 58 <= int(refused["Retry-After"]) <= 60
    said = refused.json()["error"]
    assert "1 request per minute" in said and "Try again in" in said and "UTC" in said, said
    assert conversation.jobs.count() == 1


def test_a_tokens_limits_hold_on_top_of_its_owners(ready, bob):
    nightly, by_nightly = key_of(bob, "nightly")
    limit(nightly, requests_per_minute=1)
    _, by_other = key_of(bob, "other")
    assert ask(by_nightly).status_code == 201
    refused = ask(by_nightly)
    assert refused.status_code == 429 and "The API token “nightly”'s limit" in refused.json()["error"]
    assert ask(by_other).status_code == 201, "the owner has no limit: another token goes on"
    assert Job.objects.filter(api_token=nightly).count() == 1, "each job records the token that made it"

    limit(bob, requests_per_minute=2)  # the owner's limit caps every token of theirs
    limit(nightly, requests_per_minute=10)
    assert [ask(by_nightly).status_code, ask(by_other).status_code] == [201, 201]
    refused = ask(by_nightly)
    assert refused.status_code == 429 and refused.json()["error"].startswith("Your limit is 2"), refused.content


def test_the_labs_defaults_hold_for_whoever_has_none_of_their_own(ready, alice, bob):
    LabLimits.objects.create(pk=LabLimits.ONLY, requests_per_minute=1)
    limit(alice, requests_per_minute=5)
    _, bobs = key_of(bob)
    _, alices = key_of(alice)
    assert ask(bobs).status_code == 201
    refused = ask(bobs)
    assert refused.status_code == 429 and "The lab's default limit is 1" in refused.json()["error"]
    assert [ask(alices).status_code for _ in range(2)] == [201, 201], "her own limit replaces the default"


def test_with_redis_away_the_per_minute_limit_lets_requests_through(ready, bob, settings, monkeypatch):
    limit(bob, requests_per_minute=1)
    _, headers = key_of(bob)
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    monkeypatch.setattr(ratewindow._Client, "connection", None)
    monkeypatch.setattr(ratewindow._Client, "away_until", 0.0)
    started = time.monotonic()
    assert [ask(headers).status_code for _ in range(3)] == [201, 201, 201]
    assert time.monotonic() - started < 3, "nobody waits long for a Redis that is away"


def test_until_midnight_counts_whole_seconds_to_the_next_utc_day():
    from datetime import UTC, datetime

    assert admission.until_midnight(datetime(2026, 3, 1, 23, 59, 30, tzinfo=UTC)) == 30
    assert admission.until_midnight(datetime(2026, 3, 1, 0, 0, 0, 500000, tzinfo=UTC)) == math.ceil(86399.5)
