"""Replicas share from the first second (jobs/queue/sharing.py, routing.py, openai_models.py): a request goes to a
replica whose engine answers before one still loading; an engine with a free slot takes the next routed job
waiting on a sibling with no free slot for it (the move written and told), never a job sent to that deployment,
a batch item, or one its own free slots are about to take; /v1/models counts as ready only replicas whose
engine answers. No laptops: deployments are rows with the engine state an engine reports."""

from django.test import Client

from jobs.models import Batch, Job, JobKind, JobStatus
from jobs.queue import routing, sharing
from models_app.models import Deployment
from tests.jobs.conftest import bearer
from tests.jobs.standins import engine

HI = [{"role": "user", "content": "Hello?"}]


def queued(deployment: Deployment, count: int, routed: bool = True, status: str = JobStatus.QUEUED, **fields):
    params = routing.routed({"max_tokens": 16}, "tiny") if routed else {"max_tokens": 16}
    return [Job.objects.create(kind=JobKind.CHAT, deployment=deployment, messages=HI, status=status, params=params,
                               **fields) for _ in range(count)]


def set_engine(deployment: Deployment, state: str = "ready", **fields) -> None:
    report = engine(**fields) if state == "ready" else {"state": state, **fields}
    Deployment.objects.filter(pk=deployment.pk).update(engine=report)


def test_a_request_goes_to_a_replica_that_answers_before_one_still_loading(replicas):
    first, second = replicas
    set_engine(first, slots=2, busy=2)
    queued(first, 2, status=JobStatus.RUNNING)
    queued(first, 6)
    set_engine(second, state="loading", progress=0.4)
    assert routing.pick("tiny") == first, "a full queue that answers, not an engine that may take a minute"
    set_engine(second, slots=2, busy=0)
    assert routing.pick("tiny") == second


def test_a_free_slot_takes_the_first_routed_job_waiting_on_a_full_sibling(replicas, sent):
    first, second = replicas
    set_engine(first, slots=1, busy=1)
    queued(first, 1, status=JobStatus.RUNNING)
    sent_there = queued(first, 1, routed=False)[0]
    waiting = queued(first, 3)
    taken = sharing.take(Deployment.objects.get(pk=second.pk))
    assert taken.pk == waiting[0].pk and taken.status == JobStatus.RUNNING and taken.deployment_id == second.pk
    (move,) = taken.params["routing"]["moves"]
    assert (move["from"], move["to"], move["why"]) == (first.pk, second.pk, sharing.WHY)
    assert Job.objects.get(pk=sent_there.pk).deployment_id == first.pk, "sent to that deployment: it stays"
    still = Job.objects.filter(deployment=first, status=JobStatus.QUEUED).exclude(pk=sent_there.pk)
    assert sorted(still.values_list("pk", flat=True)) == [job.pk for job in waiting[1:]]


def test_nothing_moves_that_its_own_free_slots_take_nor_batch_items(replicas, bob, sent):
    first, second = replicas
    set_engine(first, slots=2, busy=0)
    queued(first, 2)
    assert sharing.take(Deployment.objects.get(pk=second.pk)) is None, "two free slots take the two waiting"
    Job.objects.filter(deployment=first).delete()
    set_engine(first, slots=1, busy=1)
    queued(first, 1, status=JobStatus.RUNNING)
    batch = Batch.objects.create(user=bob, deployment=first, name="b.jsonl", input_format="jsonl")
    for line in (1, 2):
        Job.objects.create(kind=JobKind.BATCH_ITEM, deployment=first, user=bob, batch=batch, line=line, messages=HI,
                           params=routing.routed({"max_tokens": 16}, "tiny"))
    assert sharing.take(Deployment.objects.get(pk=second.pk)) is None, "a batch waits in its own queue"


def test_models_counts_as_ready_only_replicas_whose_engine_answers(replicas, bob):
    first, second = replicas
    set_engine(first, slots=2, busy=0)
    set_engine(second, state="loading", progress=0.4)
    api = Client(**bearer(bob))
    listed = {entry["id"]: entry for entry in api.get("/v1/models").json()["data"]}
    assert listed["tiny"]["replicas"] == 1 and listed["tiny"]["deployment"] == first.pk
    assert listed[f"deployment-{second.pk}"]["state"] == "loading"
    assert listed[f"deployment-{second.pk}"]["replicas"] == 0
    set_engine(second, slots=2, busy=0)
    listed = {entry["id"]: entry for entry in api.get("/v1/models").json()["data"]}
    assert listed["tiny"]["replicas"] == 2 and listed[f"deployment-{second.pk}"]["state"] == "ready"
