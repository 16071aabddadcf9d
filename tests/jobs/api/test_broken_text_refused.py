"""Text that is not Unicode — a lone UTF-16 surrogate, which JSON can carry as "\\ud800" — is refused at the door
with a 400 naming the field, by both APIs and the chat page, and no job is made: the model cannot read it,
and a job holding it could never run."""

import pytest
from django.test import Client

from jobs.models import Conversation, Job
from tests.jobs.conftest import bearer

pytestmark = pytest.mark.timeout(60)  # text that slipped through would wait for an engine forever
BROKEN = '"Hello \\ud800 there"'  # as a JSON string: the escape, not the character


def post(url: str, raw: str, **headers):
    return Client().post(url, raw.encode(), content_type="application/json", **headers)


@pytest.mark.parametrize(("url", "raw", "param"), [
    ("/v1/chat/completions", f'{{"messages": [{{"role": "user", "content": {BROKEN}}}]}}', "messages[0].content"),
    ("/v1/chat/completions", f'{{"messages": [{{"role": "user", "content": [{{"type": "text", "text": {BROKEN}}}]}}]}}',
     "messages[0].content"),
    ("/v1/completions", f'{{"prompt": {BROKEN}}}', "prompt"),
])
def test_it_refuses_broken_text_in_the_openai_api(ready, bob, url, raw, param):
    answer = post(url, raw, **bearer(bob))
    assert answer.status_code == 400, answer.content
    assert answer.json()["error"]["param"] == param and "surrogate" in answer.json()["error"]["message"]
    assert not Job.objects.exists()


def test_it_refuses_broken_text_in_the_rest_api(ready, bob):
    answer = post("/api/jobs/", f'{{"messages": [{{"role": "user", "content": {BROKEN}}}]}}', **bearer(bob))
    assert answer.status_code == 400 and answer.json()["field"] == "messages[0].content", answer.content
    assert not Job.objects.exists()


def test_it_refuses_broken_text_on_the_chat_page(ready, bob):
    conversation = Conversation.objects.create(user=bob, deployment=ready)
    client = Client()
    client.force_login(bob)
    answer = client.post(f"/chat/{conversation.pk}/send/", f'{{"text": {BROKEN}, "deployment": {ready.pk}}}',
                         content_type="application/json")
    assert answer.status_code == 400 and "surrogate" in answer.json()["error"], answer.content
    assert not Job.objects.exists()
