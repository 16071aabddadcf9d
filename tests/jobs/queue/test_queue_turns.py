"""People take turns: among waiting chats and API requests, a job's turn is what its user has running on the
deployment plus that user's own jobs waiting ahead of it; jobs go by turn, then age. Batch items come after
all of them, and an engine can pass them over to keep a slot for people (`batch_allowed=False`)."""

import asyncio
import json

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.test import Client

from clusterpanel.accounts.models import User
from jobs.models import Batch, Conversation, Job, JobKind, JobStatus
from jobs.queue import queueing, stream
from models_app.models import Deployment
from tests.jobs.conftest import bearer


@pytest.fixture
def make(ready):
    def job(user: User | None, batch: Batch | None = None, status: str = JobStatus.QUEUED) -> Job:
        return Job.objects.create(kind=JobKind.COMPLETION, deployment=ready, user=user, prompt="hi", batch=batch,
                                  params={"max_tokens": 4}, status=status)

    return job


@pytest.fixture
def batch(ready, bob):
    return lambda: Batch.objects.create(user=bob, deployment=ready, name="b.jsonl", input_format="jsonl")


def api_requests(user: User, count: int) -> list[int]:
    client, headers = Client(), bearer(user)
    sent = [client.post("/api/jobs/", {"prompt": f"request {n}", "kind": "completion"},
                        content_type="application/json", **headers) for n in range(count)]
    assert all(answer.status_code == 201 for answer in sent), sent[0].content
    return [answer.json()["id"] for answer in sent]


def chat(user: User, text: str, deployment: Deployment) -> dict:
    client = Client()
    client.force_login(user)
    conversation = Conversation.objects.create(user=user)
    answer = client.post(f"/chat/{conversation.pk}/send/", json.dumps({"text": text, "deployment": deployment.pk}),
                         content_type="application/json")
    assert answer.status_code == 200, answer.content
    return answer.json()


def test_it_claims_a_chat_before_another_users_twenty_waiting_api_requests(ready, bob, alice):
    requests = api_requests(bob, 20)
    assert queueing.claim_next(ready.pk).pk == requests[0], "the engine is under way with bob's first"

    sent = chat(alice, "Is anyone there?", ready)

    assert sent["position"] == 1, "the chat page tells alice she is next"
    assert queueing.claim_next(ready.pk).pk == sent["job"]
    assert [queueing.claim_next(ready.pk).pk for _ in requests[1:]] == requests[1:]


def test_it_counts_what_a_user_has_running_as_turns_taken(make, ready, bob, alice):
    make(bob, status=JobStatus.RUNNING)
    make(bob, status=JobStatus.RUNNING)
    bobs = make(bob)  # turn 2
    alices = [make(alice), make(alice), make(alice)]  # turns 0, 1, 2; the last is younger than bob's

    assert queueing.position(bobs) == 3
    assert [queueing.position(job) for job in alices] == [1, 2, 4]
    claimed = [queueing.claim_next(ready.pk).pk for _ in range(4)]
    assert claimed == [alices[0].pk, alices[1].pk, bobs.pk, alices[2].pk]


def test_it_makes_jobs_without_a_user_take_turns_as_one_person(make, ready, bob):
    nobodys = [make(None), make(None)]
    bobs = make(bob)

    assert [queueing.position(job) for job in (*nobodys, bobs)] == [1, 3, 2]
    assert [queueing.claim_next(ready.pk).pk for _ in range(3)] == [nobodys[0].pk, bobs.pk, nobodys[1].pk]


def test_it_passes_over_batch_items_when_the_engine_keeps_a_slot_for_people(make, batch, ready, bob):
    items = [make(bob, batch()) for _ in range(2)]

    assert queueing.claim_next(ready.pk, batch_allowed=False) is None, "only batch items wait"
    assert all(Job.objects.get(pk=item.pk).status == JobStatus.QUEUED for item in items)
    chat_job = make(bob)
    assert queueing.claim_next(ready.pk, batch_allowed=False).pk == chat_job.pk
    assert queueing.claim_next(ready.pk, batch_allowed=True).pk == items[0].pk


def test_it_puts_batch_items_after_everyone_whoever_has_jobs_running(make, batch, ready, bob, alice):
    make(alice, status=JobStatus.RUNNING)
    item = make(bob, batch())
    later_chat = make(alice)

    assert queueing.position(later_chat) == 1 and queueing.position(item) == 2
    assert queueing.claim_next(ready.pk).pk == later_chat.pk


def test_it_tells_the_jobs_a_new_chat_goes_ahead_of_their_new_places(ready, bob, alice,
                                                                     django_capture_on_commit_callbacks):
    bobs = api_requests(bob, 3)
    queueing.claim_next(ready.pk)
    layer = get_channel_layer()
    listeners = {job_id: async_to_sync(layer.new_channel)() for job_id in bobs[1:]}
    for job_id, listener in listeners.items():
        async_to_sync(layer.group_add)(stream.group(job_id), listener)

    with django_capture_on_commit_callbacks(execute=True):  # as when the chat's row is committed
        sent = chat(alice, "Me too?", ready)

    assert sent["position"] == 1
    told = {job_id: async_to_sync(asyncio.wait_for)(layer.receive(listener), 10)["payload"]
            for job_id, listener in listeners.items()}
    assert told == {bobs[1]: {"event": "queue", "position": 2}, bobs[2]: {"event": "queue", "position": 3}}


def test_a_job_its_engine_claims_while_its_place_is_read_is_not_told_it_waits(make, ready, bob, monkeypatch):
    from jobs.queue import standing as standing_module

    ready.engine = {"state": "ready", "slots": 1, "busy": 1}
    ready.save(update_fields=["engine"])
    job = make(bob)
    assert standing_module.standing(job.pk).startswith("queued, next in line"), "a full engine: it waits"
    counted = queueing.position

    def claimed_meanwhile(read: Job) -> int:  # the engine takes it between the job's read and its place's
        Job.objects.filter(pk=read.pk).update(status=JobStatus.RUNNING)
        return counted(read)

    monkeypatch.setattr(standing_module.queueing, "position", claimed_meanwhile)
    assert standing_module.standing(job.pk) is None, "it runs: a streamed request answers at its first token"
