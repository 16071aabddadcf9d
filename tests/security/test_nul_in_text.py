"""A NUL ("\\u0000" in JSON) is refused at every JSON door that takes text, with a 400 naming the field, and
nothing is stored: PostgreSQL (the compose stack's database) refuses a NUL in text and jsonb alike, so a job,
system prompt or batch line holding one was a 500 there, while SQLite took it."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from jobs.models import Batch, Conversation, Job
from tests.jobs.conftest import bearer

pytestmark = pytest.mark.timeout(60)  # text that slipped through would wait for an engine forever
NUL = '"Hello \\u0000 there"'  # as a JSON string: the escape, which json.loads makes a NUL


def post(client: Client, url: str, raw: str, **headers):
    return client.post(url, raw.encode(), content_type="application/json", **headers)


@pytest.mark.parametrize(("url", "raw", "param"), [
    ("/v1/chat/completions", f'{{"messages": [{{"role": "user", "content": {NUL}}}]}}', "messages[0].content"),
    ("/v1/chat/completions", f'{{"messages": [{{"role": "user", "content": "Hi"}}], "stop": [{NUL}]}}', "stop"),
    ("/v1/completions", f'{{"prompt": {NUL}}}', "prompt"),
])
def test_it_refuses_a_nul_in_the_openai_api(ready, bob, url, raw, param):
    answer = post(Client(), url, raw, **bearer(bob))
    assert answer.status_code == 400, answer.content
    assert answer.json()["error"]["param"] == param and "NUL" in answer.json()["error"]["message"]
    assert not Job.objects.exists()


def test_it_refuses_a_nul_in_the_rest_api(ready, bob):
    answer = post(Client(), "/api/jobs/", f'{{"messages": [{{"role": "user", "content": {NUL}}}]}}', **bearer(bob))
    assert answer.status_code == 400 and answer.json()["field"] == "messages[0].content", answer.content
    assert not Job.objects.exists()


@pytest.mark.parametrize("fields", [f'"text": {NUL}', f'"text": "Hi", "system_prompt": {NUL}'])
def test_it_refuses_a_nul_on_the_chat_page(ready, bob, fields):
    conversation = Conversation.objects.create(user=bob, deployment=ready)
    client = Client()
    client.force_login(bob)
    answer = post(client, f"/chat/{conversation.pk}/send/", f'{{{fields}, "deployment": {ready.pk}}}')
    assert answer.status_code == 400 and "NUL" in answer.json()["error"], answer.content
    conversation.refresh_from_db()
    assert conversation.system_prompt == "" and conversation.title == "" and not Job.objects.exists()


def test_it_rejects_batch_lines_with_a_nul_and_runs_the_rest(ready, bob):
    def line(custom_id: str, content: str = "Hi") -> str:
        return json.dumps({"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions",
                           "body": {"messages": [{"role": "user", "content": content}]}})

    upload = SimpleUploadedFile("in.jsonl", "\n".join([line("a\x00"), line("b", "Hi \x00"), line("c")]).encode())
    client = Client()
    client.force_login(bob)
    assert client.post("/jobs/batches/", {"deployment": ready.pk, "file": upload}).status_code == 302
    batch = Batch.objects.get()
    assert list(batch.items.values_list("custom_id", flat=True)) == ["c"]
    assert all("NUL" in bad["reason"] for bad in batch.rejected) and len(batch.rejected) == 2
