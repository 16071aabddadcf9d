"""Generation parameters are checked in plain words; the chat page refuses what it cannot run; answers
render as Markdown with no way for model text to become markup."""

import json

import pytest
from django.test import Client

from jobs.chat import conversations
from jobs.models import Conversation, Job
from jobs.params import ParamError, validate
from models_app.library.adding import ensure_bundled
from models_app.models import Deployment, DeploymentStatus


@pytest.mark.parametrize(("raw", "named"), [
    ({"temperature": -1}, "temperature"), ({"temperature": "hot"}, "temperature"),
    ({"temperature": float("nan")}, "temperature"), ({"top_p": 1.5}, "top_p"), ({"top_k": 2.5}, "top_k"),
    ({"max_tokens": 0}, "max_tokens"), ({"max_tokens": 10**9}, "max_tokens"), ({"max_tokens": True}, "max_tokens"),
    ({"seed": -3}, "seed"), ({"stop": 5}, "stop"), ({"stop": ["a"] * 9}, "stop"), ({"stop": [""]}, "stop"),
    ({"repeat_penalty": 9}, "repeat_penalty"), ({"temprature": 0.5}, "temprature"),
])
def test_bad_parameters_are_refused_naming_the_parameter(raw, named):
    with pytest.raises(ParamError, match=named):
        validate(raw)


def test_good_parameters_come_back_typed_with_defaults():
    params = validate({"temperature": "0.2", "max_tokens": "64", "stop": "END", "seed": 7})
    assert (params.temperature, params.max_tokens, params.stop, params.seed, params.top_k) == (0.2, 64, ["END"], 7, 40)


def test_markdown_renders_but_html_and_script_links_do_not():
    html = conversations.render("**bold** <script>alert(1)</script> [x](javascript:alert(1)) <img src=x onerror=y>")
    assert "<strong>bold</strong>" in html
    assert "<script>" not in html and "<img" not in html and 'href="javascript' not in html


@pytest.fixture
def ready(db):
    return Deployment.objects.create(model=ensure_bundled(), ctx=512, plan={"stages": []},
                                     status=DeploymentStatus.READY)


def send(client, conversation, **body):
    return client.post(f"/chat/{conversation.pk}/send/", json.dumps(body), content_type="application/json")


def test_the_chat_page_explains_what_it_cannot_do(bob, alice, ready):
    client = Client()
    client.force_login(bob)
    page = client.get("/chat/", follow=True)
    assert page.status_code == 200
    conversation = Conversation.objects.get(user=bob)
    assert send(client, conversation, text="", deployment=ready.pk).json()["error"] == "Type a message first."
    answer = send(client, conversation, text="hi", deployment=ready.pk, params={"top_p": 7})
    assert answer.status_code == 400 and "top_p" in answer.json()["error"]
    answer = send(client, conversation, text="hi", deployment=999)
    assert answer.status_code == 400 and "ready deployment" in answer.json()["error"]
    bad = client.post(f"/chat/{conversation.pk}/send/", "{not json", content_type="application/json")
    assert bad.status_code == 400
    assert not Job.objects.exists(), "nothing was queued for any of these"
    other = Conversation.objects.create(user=alice)
    assert send(client, other, text="hi", deployment=ready.pk).status_code == 404


def test_a_message_becomes_a_job_with_the_history_and_system_prompt(bob, ready):
    client = Client()
    client.force_login(bob)
    conversation = Conversation.objects.create(user=bob)
    answer = send(client, conversation, text="Hello there", deployment=ready.pk, system_prompt="Be brief.",
                  params={"temperature": 0, "max_tokens": 5})
    assert answer.status_code == 200, answer.content
    job = Job.objects.get(pk=answer.json()["job"])
    assert job.messages == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"}]
    assert job.params["max_tokens"] == 5 and answer.json()["position"] == 1
    again = send(client, conversation, text="And again", deployment=ready.pk)
    assert again.status_code == 400 and "still coming" in again.json()["error"]
