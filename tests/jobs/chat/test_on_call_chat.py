"""The chat page offers on-call models that nothing serves yet, and a message to an asleep one wakes it once the
turn is admitted: the turn waits on the load. A user over a limit wakes nothing; a model that fits nowhere is
said in words. No laptops: deployments are rows, and messages to workers are caught."""

import json

from django.test import Client

from clusterpanel.accounts.limits import set_limits
from jobs.models import Conversation, Job, JobKind, JobStatus
from models_app.models import Deployment, DeploymentStatus
from nodes.models import Node
from tests.oncall_rows import GiB, gguf, laptops, on_call


def send(client, conversation, **body):
    return client.post(f"/chat/{conversation.pk}/send/", json.dumps(body), content_type="application/json")


def test_a_message_to_an_asleep_model_wakes_it_and_waits_on_the_load(db, sent, bob):
    pool = laptops(1)
    on_call(gguf("small"), pool)
    client = Client()
    client.force_login(bob)
    conversation = Conversation.objects.create(user=bob)
    page = client.get(f"/chat/{conversation.pk}/").content.decode()
    assert 'value="model:small"' in page and "asleep: your first message loads it" in page

    set_limits(bob, {"concurrent_jobs": 1})
    running = Job.objects.create(kind=JobKind.CHAT, user=bob, status=JobStatus.RUNNING, messages=[])
    over = send(client, conversation, text="Hello", deployment="model:small")
    assert over.status_code == 429 and not Deployment.objects.exists(), "over a limit: nothing woken"
    Job.objects.filter(pk=running.pk).update(status=JobStatus.SUCCEEDED)

    answer = send(client, conversation, text="Hello", deployment="model:small")
    assert answer.status_code == 200, answer.content
    job = Job.objects.get(pk=answer.json()["job"])
    assert job.deployment.on_call and job.deployment.status == DeploymentStatus.PLANNED
    assert job.params["routing"]["model"] == "small", "routed by the model: failover may move it"
    page = client.get(f"/chat/{conversation.pk}/").content.decode()
    assert 'value="model:small" selected' in page and "(loading)" in page


def test_a_model_that_fits_nowhere_is_said_in_words(db, sent, bob):
    pool = laptops(1)
    on_call(gguf("small"), pool)
    Node.objects.filter(pk=pool[0].pk).update(usable_memory=GiB // 2)
    client = Client()
    client.force_login(bob)
    conversation = Conversation.objects.create(user=bob)
    answer = send(client, conversation, text="Hello", deployment="model:small")
    assert answer.status_code == 400 and answer.json()["error"].startswith("small cannot be loaded anywhere: it needs")
    assert not Deployment.objects.exists() and not Job.objects.exists()
