"""Odd numbers and broken text are refused with a 400 in words, never a 500: a node id of "²" (str.isdigit() takes
it, int() does not) or past what SQLite holds, a chat deployment that is not an id, a number of 400 digits where
a parameter is a float, a lone UTF-16 surrogate in a chat's system prompt or a stop string. Nothing is stored."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from jobs.models import Batch, Conversation, Job
from tests.jobs.conftest import bearer

pytestmark = pytest.mark.timeout(60)  # a request that slipped through would wait for an engine forever
HUGE = "1" + "0" * 400  # a JSON integer float() cannot hold
HI = [{"role": "user", "content": "Hi"}]


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize(("query", "field"), [
    ("node=²", "node"), ("node=٣", "node"), ("node=99999999999999999999", "node"), ("node=-1", "node"),
    ("node=1.5", "node"), ("seconds=²", "seconds"), ("seconds=1e400", "seconds"), ("seconds=" + "9" * 5000, "seconds"),
])
def test_it_refuses_odd_numbers_in_the_recent_metrics_query(alice, query, field):
    answer = signed_in(alice).get(f"/nodes/metrics/recent.json?{query}")
    assert answer.status_code == 400, answer.content
    assert answer.json()["field"] == field and "whole number" in answer.json()["error"]


def test_it_still_answers_a_plain_node_id(alice):
    assert signed_in(alice).get("/nodes/metrics/recent.json?node=12&seconds=60").json() == {"nodes": []}


@pytest.fixture
def conversation(bob, ready) -> Conversation:
    return Conversation.objects.create(user=bob, deployment=ready)


def send(user, conversation: Conversation, raw: str):
    return signed_in(user).post(f"/chat/{conversation.pk}/send/", raw.encode(), content_type="application/json")


@pytest.mark.parametrize("deployment", ['"abc"', '"²"', '"1.5"', "1.5", "[1]", '{"id": 1}', "true", "-1",
                                        "100000000000000000000000000000", '"100000000000000000000000000000"'])
def test_it_refuses_a_chat_deployment_that_is_not_an_id(bob, conversation, deployment):
    answer = send(bob, conversation, f'{{"text": "Hello", "deployment": {deployment}}}')
    assert answer.status_code == 400, answer.content
    assert answer.json()["error"].startswith("Choose a ready deployment") and not Job.objects.exists()


def test_it_refuses_a_lone_surrogate_in_a_chat_system_prompt(bob, conversation, ready):
    answer = send(bob, conversation, f'{{"text": "Hello", "system_prompt": "Be \\ud800 brief", '
                                     f'"deployment": {ready.pk}}}')
    assert answer.status_code == 400 and "surrogate" in answer.json()["error"], answer.content
    conversation.refresh_from_db()
    assert conversation.system_prompt == "" and not Job.objects.exists()


def test_it_refuses_a_lone_surrogate_in_a_chat_message_and_keeps_the_title(bob, conversation, ready):
    answer = send(bob, conversation, f'{{"text": "\\udfff Hello", "deployment": {ready.pk}}}')
    assert answer.status_code == 400 and "surrogate" in answer.json()["error"], answer.content
    conversation.refresh_from_db()
    assert conversation.title == "" and not Job.objects.exists()


@pytest.mark.parametrize("params", [f'{{"temperature": {HUGE}}}', f'{{"top_p": -{HUGE}}}',
                                    '{"stop": ["\\ud800"]}', '{"temperature": "٠.٥"}', '{"max_tokens": "٣٢"}'])
def test_it_refuses_odd_parameters_on_the_chat_page(bob, conversation, ready, params):
    answer = send(bob, conversation, f'{{"text": "Hello", "deployment": {ready.pk}, "params": {params}}}')
    assert answer.status_code == 400, answer.content
    assert answer.json()["field"] == next(iter(json.loads(params))) and not Job.objects.exists()


@pytest.mark.parametrize("params", [f'{{"temperature": {HUGE}}}', f'{{"repeat_penalty": {HUGE}}}',
                                    '{"stop": "\\ud800"}'])
def test_it_refuses_odd_parameters_in_the_rest_api(bob, ready, params):
    raw = f'{{"messages": {json.dumps(HI)}, "params": {params}}}'
    answer = Client().post("/api/jobs/", raw.encode(), content_type="application/json", **bearer(bob))
    assert answer.status_code == 400, answer.content
    assert answer.json()["field"] == f"params.{next(iter(json.loads(params)))}" and not Job.objects.exists()


@pytest.mark.parametrize("field", ["temperature", "top_p", "repeat_penalty"])
def test_it_refuses_a_400_digit_number_in_the_openai_api(bob, ready, field):
    raw = f'{{"messages": {json.dumps(HI)}, "{field}": {HUGE}}}'
    answer = Client().post("/v1/chat/completions", raw.encode(), content_type="application/json", **bearer(bob))
    assert answer.status_code == 400, answer.content
    assert answer.json()["error"]["param"] == field and not Job.objects.exists()


def batch_line(custom_id: str, content: str = "Hi") -> str:
    return (f'{{"custom_id": "{custom_id}", "method": "POST", "url": "/v1/chat/completions", '
            f'"body": {{"messages": [{{"role": "user", "content": "{content}"}}]}}}}')


def test_it_rejects_batch_lines_with_a_lone_surrogate_and_runs_the_rest(bob, ready):
    lines = [batch_line("a\\ud800"), batch_line("b", "Hi \\udfff"), batch_line("c")]
    upload = SimpleUploadedFile("in.jsonl", "\n".join(lines).encode())
    client = signed_in(bob)
    answer = client.post("/jobs/batches/", {"deployment": ready.pk, "file": upload})
    assert answer.status_code == 302, answer.content[:2000]
    batch = Batch.objects.get()
    assert list(batch.items.values_list("custom_id", flat=True)) == ["c"]
    reasons = {bad["line"]: bad["reason"] for bad in batch.rejected}
    broken = "contains a lone UTF-16 surrogate (such as \\ud800) or a NUL (\\u0000), which is not text."
    assert reasons == {1: f"custom_id {broken}", 2: f"body.messages[0].content {broken}"}
    for page in ("", "results.csv", "results.jsonl"):
        assert client.get(f"/jobs/batches/{batch.pk}/{page}").status_code == 200


@pytest.mark.parametrize("name", ["a\x00b", "tab\there", "\x1b[31mred"])
def test_it_refuses_a_token_name_that_is_not_printable(bob, name):
    answer = signed_in(bob).post("/account/tokens/", {"name": name})
    assert answer.status_code == 400 and "printable" in answer.content.decode()
    assert not bob.api_tokens.exists()
