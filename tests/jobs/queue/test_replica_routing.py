"""A request that names a model goes to its replica that will answer soonest: one with a free slot before a full
one, the shorter queue when both are full, the faster engine when both have room (a fast engine with a short
queue can beat an idle slow one); a conversation stays on the replica that read it unless that one is much
slower; a replica with a laptop offline, or not ready, is passed over. Every door that names a model routes
(/v1, /api/jobs/, the chat page) and marks the job as routed; one that names a deployment does not. No
laptops: deployments are rows with the engine state an engine reports."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from jobs.api import openai_api, openai_views
from jobs.chat import conversations
from jobs.models import Conversation, Job, JobKind, JobStatus
from jobs.queue import routing
from models_app.models import Deployment, DeploymentStage, DeploymentStatus
from nodes.models import Node, NodeStatus
from tests.jobs.conftest import bearer
from tests.jobs.standins import engine

HI = [{"role": "user", "content": "Hello?"}]


def jobs(deployment: Deployment, status: str, count: int, user=None) -> list[Job]:
    return [Job.objects.create(kind=JobKind.CHAT, deployment=deployment, user=user, messages=HI, status=status)
            for _ in range(count)]


def set_engine(deployment: Deployment, **state) -> None:
    Deployment.objects.filter(pk=deployment.pk).update(engine=engine(**state))


def test_it_sends_a_request_to_the_replica_with_a_free_slot(replicas):
    first, second = replicas
    jobs(first, JobStatus.RUNNING, 2)
    jobs(second, JobStatus.RUNNING, 1)
    assert routing.pick("tiny") == second
    jobs(second, JobStatus.QUEUED, 2)  # now the fuller: a new job waits for two slots there, for one on the first
    assert routing.pick("tiny") == first


def test_when_both_are_full_the_shorter_queue_wins_and_the_wait_is_counted_in_slots(replicas):
    first, second = replicas
    for deployment, waiting in ((first, 3), (second, 1)):
        jobs(deployment, JobStatus.RUNNING, 2)
        jobs(deployment, JobStatus.QUEUED, waiting)
        set_engine(deployment, slots=2, busy=2, tokens_per_s=20.0)  # 10 tokens/s per answer
    estimates = {e.deployment.pk: e for e in routing.estimates(list(Deployment.objects.all()), tokens=50)}
    # Two slots end two answers every 50 / 10 = 5 s: a slot frees every 2.5 s, and the new job needs ahead - 1.
    assert estimates[second.pk].wait_s == pytest.approx(2 * 2.5)
    assert estimates[first.pk].wait_s == pytest.approx(4 * 2.5)
    assert estimates[second.pk].answer_s == pytest.approx(5 + 5)
    assert routing.pick("tiny", 50) == second


def test_when_both_have_room_the_faster_engine_wins(replicas):
    first, second = replicas
    jobs(first, JobStatus.RUNNING, 1)
    jobs(second, JobStatus.RUNNING, 1)
    set_engine(first, busy=1, tokens_per_s=15.0)
    set_engine(second, busy=1, tokens_per_s=45.0)
    assert routing.pick("tiny") == second
    set_engine(second, busy=1, tokens_per_s=45.0, age_s=60)  # stale: nothing generated there for a minute...
    done = timezone.now()
    Job.objects.create(kind=JobKind.CHAT, deployment=second, messages=HI, status=JobStatus.SUCCEEDED,
                       completion_tokens=31, first_token=done - timedelta(seconds=6), finished=done)
    assert routing.measured_rate(Deployment.objects.get(pk=second.pk)) == pytest.approx(5.0)
    assert routing.pick("tiny") == first, "...so its last answers' 5 tokens/s count, slower than 15"
    Job.objects.create(kind=JobKind.CHAT, deployment=second, messages=HI, status=JobStatus.SUCCEEDED,
                       completion_tokens=31, first_token=done - timedelta(seconds=6), finished=done)
    assert routing.measured_rate(Deployment.objects.get(pk=second.pk)) == pytest.approx(10.0), \
        "two answers made side by side: the engine's rate is both together"


def test_a_fast_engine_with_a_short_queue_beats_an_idle_slow_one(replicas):
    first, second = replicas
    Deployment.objects.filter(pk=first.pk).update(slots=1, engine=engine(slots=1, busy=1, tokens_per_s=100.0))
    jobs(first, JobStatus.RUNNING, 1)
    jobs(first, JobStatus.QUEUED, 2)
    set_engine(second, slots=2, busy=1, tokens_per_s=10.0)  # its last report: one answer at 10 tokens/s
    # first: 3 slots' worth ahead at 1 s each, then 1 s of its own = 4 s; second: 100 tokens at 10/s = 10 s.
    estimates = {e.deployment.pk: e for e in routing.estimates(list(Deployment.objects.all()), tokens=100)}
    assert estimates[first.pk].answer_s == pytest.approx(4.0) and estimates[second.pk].answer_s == pytest.approx(10)
    assert routing.pick("tiny", 100) == first
    assert routing.pick("tiny", 100, leaving=first.pk) == second, "a failing replica is left out"


def test_a_burst_is_shared_by_the_replicas_rates_and_not_sent_to_the_faster_one_while_it_has_a_free_slot(
        replicas):
    """An engine shares its rate among its answers: a replica making 1.5 times the tokens/s of the other takes
    about 1.5 times the requests of a burst, not every request until its slots are full and more (one answer's
    speed once sent a burst of 16 requests 12 to 4)."""
    first, second = replicas
    for deployment, rate in ((first, 10.0), (second, 15.0)):
        Deployment.objects.filter(pk=deployment.pk).update(slots=8, engine=engine(slots=8, busy=1,
                                                                                  tokens_per_s=rate))
    for _ in range(16):  # each saved before the next is routed, as the doors do in one transaction
        jobs(routing.pick("tiny", 128), JobStatus.QUEUED, 1)
    counts = {pk: Job.objects.filter(deployment=pk).count() for pk in (first.pk, second.pk)}
    assert counts == {first.pk: 6, second.pk: 10} or counts == {first.pk: 7, second.pk: 9}, counts


def test_a_conversation_stays_on_the_replica_that_read_it_unless_it_is_much_slower(replicas, bob):
    first, second = replicas
    conversation = Conversation.objects.create(user=bob)
    Job.objects.create(kind=JobKind.CHAT, deployment=second, user=bob, conversation=conversation, messages=HI,
                       status=JobStatus.SUCCEEDED)
    for deployment in replicas:
        set_engine(deployment, slots=1, busy=1, tokens_per_s=10.0)
    jobs(second, JobStatus.RUNNING, 1)  # second: 40 tokens wait 4 s, then 4 s: 8 s; first, idle: 4 s
    assert routing.pick("tiny", 40) == first
    chosen, routed_by = conversations.chosen("model:tiny", conversation, 40)
    assert (chosen, routed_by) == (second, "tiny"), "twice as slow and 4 s more: it keeps its prefix"
    jobs(second, JobStatus.QUEUED, 2)  # 16 s, four times as slow and 12 s more: moving pays for re-reading
    assert conversations.chosen("model:tiny", conversation, 40) == (first, "tiny")
    assert conversations.chosen(str(second.pk), conversation, 40) == (second, None), "a deployment stays chosen"


def test_a_replica_with_a_laptop_offline_or_not_ready_is_passed_over(replicas):
    first, second = replicas
    jobs(second, JobStatus.RUNNING, 2)
    jobs(second, JobStatus.QUEUED, 5)
    laptop = Node.objects.create(name="desk-1", host="10.232.0.50", username="u", status=NodeStatus.READY)
    DeploymentStage.objects.create(deployment=first, position=0, node=laptop, first_layer=0, layer_count=2,
                                   memory={})
    assert routing.pick("tiny") == first
    laptop.set_status(NodeStatus.OFFLINE, "No metrics for 4 s.")
    assert routing.pick("tiny") == second, "the idle replica's laptop is offline"
    laptop.set_status(NodeStatus.READY)
    Deployment.objects.filter(pk=first.pk).update(engine={"state": "loading", "progress": 0.4})
    loading = routing.estimates([Deployment.objects.get(pk=first.pk)], 256)[0]
    assert loading.not_serving_s == routing.LOADING_S
    Deployment.objects.filter(pk=first.pk).update(status=DeploymentStatus.STOPPED)
    assert routing.replicas("tiny") == [second] and routing.pick("tiny", leaving=second.pk) is None


def test_every_door_that_names_a_model_routes_and_marks_the_job(replicas, bob):
    first, second = replicas
    jobs(first, JobStatus.RUNNING, 3)
    job, model = openai_views.submit(bob, None, openai_api.parse({"model": "tiny", "messages": HI}, JobKind.CHAT))
    assert (job.deployment, model, routing.routed_model(job)) == (second, "tiny", "tiny")
    pinned, _ = openai_views.submit(bob, None, openai_api.parse({"model": f"deployment-{first.pk}", "messages": HI},
                                                                JobKind.CHAT))
    assert pinned.deployment == first and routing.routed_model(pinned) is None and "routing" not in pinned.params

    api = Client(**bearer(bob))
    made = api.post("/api/jobs/", {"messages": HI, "model": "tiny"}, "application/json")
    assert made.status_code == 201 and made.json()["deployment"] == second.pk, made.content
    detail = api.get(f"/api/jobs/{made.json()['id']}/").json()
    assert detail["params"]["routing"] == {"model": "tiny", "moves": []}
    assert api.post("/api/jobs/", {"messages": HI}, "application/json").json()["deployment"] == second.pk, \
        "no model and no deployment: the default's model, routed"
    both = api.post("/api/jobs/", {"messages": HI, "model": "tiny", "deployment": first.pk}, "application/json")
    assert both.status_code == 400 and "not both" in both.json()["error"]
    unknown = api.post("/api/jobs/", {"messages": HI, "model": "gpt-4o"}, "application/json")
    assert unknown.status_code == 404 and "'gpt-4o' does not exist" in unknown.json()["error"]

    listed = {entry["id"]: entry for entry in api.get("/v1/models").json()["data"]}
    assert listed["tiny"]["replicas"] == 2 and listed[f"deployment-{second.pk}"]["replicas"] == 1


def test_the_chat_page_offers_a_model_and_routes_the_turn(replicas, bob):
    first, second = replicas
    jobs(first, JobStatus.RUNNING, 2)
    browser = Client()
    browser.force_login(bob)
    conversation = Conversation.objects.create(user=bob, deployment=first)
    page = browser.get(f"/chat/{conversation.pk}/").content.decode()
    assert 'value="model:tiny" selected' in page and "(2 ready replicas)" in page
    sent = browser.post(f"/chat/{conversation.pk}/send/", {"text": "Hello?", "deployment": "model:tiny"},
                        content_type="application/json")
    assert sent.status_code == 200, sent.content
    job = Job.objects.get(pk=sent.json()["job"])
    assert job.deployment == second and routing.routed_model(job) == "tiny"
    refused = browser.post(f"/chat/{Conversation.objects.create(user=bob).pk}/send/",
                           {"text": "Hello?", "deployment": "model:gpt-4o"}, content_type="application/json")
    assert refused.status_code == 400 and "No deployment of gpt-4o is ready" in refused.json()["error"]
