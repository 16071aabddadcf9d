"""Bad requests to the APIs are 400s (or 401/404/405) in JSON naming the field at fault; never a 500,
and never a job."""

import json

import pytest
from django.test import Client

from jobs.models import Job
from tests.jobs.conftest import bearer

pytestmark = pytest.mark.timeout(60)  # a bad body that slipped through would wait for an engine forever

HI = [{"role": "user", "content": "Hi"}]
CHAT_CASES = [  # (body, the field OpenAI's error must name)
    ({}, "messages"),
    ({"messages": None}, "messages"),
    ({"messages": []}, "messages"),
    ({"messages": "Hi"}, "messages"),
    ({"messages": ["Hi"]}, "messages[0]"),
    ({"messages": [{"content": "Hi"}]}, "messages[0].role"),
    ({"messages": [{"role": "wizard", "content": "Hi"}]}, "messages[0].role"),
    ({"messages": [{"role": ["user"], "content": "Hi"}]}, "messages[0].role"),
    ({"messages": [{"role": "user"}]}, "messages[0].content"),
    ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]}, "messages[0].content"),
    ({"messages": HI, "temperature": "hot"}, "temperature"),
    ({"messages": HI, "temperature": "0.5"}, "temperature"),
    ({"messages": HI, "temperature": True}, "temperature"),
    ({"messages": HI, "temperature": 3}, "temperature"),
    ({"messages": HI, "temperature": -0.1}, "temperature"),
    ({"messages": HI, "top_p": 1.5}, "top_p"),
    ({"messages": HI, "top_p": [1]}, "top_p"),
    ({"messages": HI, "top_k": 2.5}, "top_k"),
    ({"messages": HI, "top_k": -1}, "top_k"),
    ({"messages": HI, "max_tokens": 0}, "max_tokens"),
    ({"messages": HI, "max_tokens": 10**12}, "max_tokens"),
    ({"messages": HI, "max_tokens": 2000}, "max_tokens"),  # more than the deployment's context
    ({"messages": HI, "max_tokens": "16"}, "max_tokens"),
    ({"messages": HI, "max_completion_tokens": 10**9}, "max_completion_tokens"),
    ({"messages": HI, "seed": -5}, "seed"),
    ({"messages": HI, "seed": 2**40}, "seed"),
    ({"messages": HI, "seed": 1.5}, "seed"),
    ({"messages": HI, "stop": 7}, "stop"),
    ({"messages": HI, "stop": [""]}, "stop"),
    ({"messages": HI, "stop": ["a", "b", "c", "d", "e"]}, "stop"),
    ({"messages": HI, "stop": [1, 2]}, "stop"),
    ({"messages": HI, "repeat_penalty": 9}, "repeat_penalty"),
    ({"messages": HI, "frequency_penalty": 0.5}, "frequency_penalty"),
    ({"messages": HI, "presence_penalty": "x"}, "presence_penalty"),
    ({"messages": HI, "n": 2}, "n"),
    ({"messages": HI, "n": "1"}, "n"),
    ({"messages": HI, "stream": "yes"}, "stream"),
    ({"messages": HI, "stream": True, "stream_options": "usage"}, "stream_options"),
    ({"messages": HI, "stream": True, "stream_options": {"include_usage": 1}}, "include_usage"),
    ({"messages": HI, "model": 42}, "model"),
]
RAW_CASES = [b"", b"not json", b"[1, 2]", b'"text"', b"null", b"{", b'{"messages": [}', b"\xff\xfe\x00",
             b"[" * 100000 + b"]" * 100000, b'{"messages": [{"role": "user", "content": "Hi"}], "temperature": NaN}',
             b'{"messages": [{"role": "user", "content": "Hi"}], "top_p": Infinity}',
             b'{"messages": [{"role": "user", "content": "Hi"}], "seed": 1' + b"0" * 5000 + b"}"]


@pytest.fixture
def token(bob):
    return bearer(bob)


def post(url: str, body, token: dict):
    raw = body if isinstance(body, bytes) else json.dumps(body)
    return Client().post(url, raw, content_type="application/json", **token)


@pytest.mark.parametrize(("body", "param"), CHAT_CASES, ids=[json.dumps(c[0])[:60] for c in CHAT_CASES])
def test_it_refuses_a_bad_chat_completion_naming_the_field(ready, token, body, param):
    answer = post("/v1/chat/completions", body, token)
    assert answer.status_code == 400, answer.content
    error = answer.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param, error
    assert param.split(".")[-1].split("[")[0] in error["message"] and not Job.objects.exists()


@pytest.mark.parametrize("raw", RAW_CASES, ids=range(len(RAW_CASES)))
def test_it_refuses_garbage_bodies_with_400(ready, token, raw):
    for url in ("/v1/chat/completions", "/v1/completions", "/api/jobs/"):
        answer = post(url, raw, token)
        assert answer.status_code == 400, (url, answer.content[:200])
        assert "error" in answer.json()
    assert not Job.objects.exists()


@pytest.mark.parametrize(("body", "param"), [
    ({}, "prompt"), ({"prompt": None}, "prompt"), ({"prompt": 12}, "prompt"), ({"prompt": [1, 2, 3]}, "prompt"),
    ({"prompt": ["a", "b"]}, "prompt"), ({"prompt": "Hi", "max_tokens": -1}, "max_tokens"),
    ({"prompt": "Hi", "temperature": float("nan")}, "temperature"),
])
def test_it_refuses_a_bad_completion_naming_the_field(ready, token, body, param):
    answer = post("/v1/completions", body, token)
    assert answer.status_code == 400 and answer.json()["error"]["param"] == param, answer.content


REST_CASES = [
    ({"kind": "batch_item", "messages": HI}, "kind"),
    ({"kind": ["chat"], "messages": HI}, "kind"),
    ({"messages": "Hi"}, "messages"),
    ({"messages": [{"role": "user", "content": None}]}, "messages[0].content"),
    ({"kind": "completion"}, "prompt"),
    ({"kind": "completion", "prompt": {"text": "Hi"}}, "prompt"),
    ({"messages": HI, "params": [1]}, "params"),
    ({"messages": HI, "params": {"temperature": "hot"}}, "params.temperature"),
    ({"messages": HI, "params": {"max_tokens": 5000}}, "params.max_tokens"),
    ({"messages": HI, "params": {"temprature": 0.5}}, "params.temprature"),
    ({"messages": HI, "params": {"stop": {"a": 1}}}, "params.stop"),
    ({"messages": HI, "deployment": "one"}, "deployment"),
    ({"messages": HI, "deployment": True}, "deployment"),
    ({"messages": HI, "temperature": 0.5}, "temperature"),
]


@pytest.mark.parametrize(("body", "field"), REST_CASES, ids=[json.dumps(c[0])[:60] for c in REST_CASES])
def test_it_refuses_a_bad_rest_job_naming_the_field(ready, token, body, field):
    answer = post("/api/jobs/", body, token)
    assert answer.status_code == 400, answer.content
    assert answer.json()["field"] == field and answer.json()["error"]
    assert not Job.objects.exists()


def test_it_names_an_unknown_model_or_deployment_with_404(ready, token):
    answer = post("/v1/chat/completions", {"model": "gpt-4o", "messages": HI}, token)
    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == "model_not_found" and "tiny" in answer.json()["error"]["message"]
    assert post("/api/jobs/", {"messages": HI, "deployment": 999}, token).status_code == 404


def test_it_says_plainly_when_no_deployment_is_ready(db, bob):
    answer = post("/v1/chat/completions", {"messages": HI}, bearer(bob))
    assert answer.status_code == 503 and answer.json()["error"]["code"] == "model_not_available"
    assert Client().get("/v1/models", **bearer(bob)).json()["data"] == []


def test_it_answers_wrong_methods_with_405_json(ready, token):
    assert Client().get("/v1/chat/completions", **token).status_code == 405
    assert Client().post("/v1/models", **token).status_code == 405
    assert Client().delete("/api/jobs/", **token).status_code == 405
