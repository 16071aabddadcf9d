"""A request naming an asleep on-call model plans it onto free laptops of its pool, records why, and queues its job
on the deployment being loaded; two requests at once wake it once; a second asleep model loads onto the laptops
the first left free while the first is busy; a model that fits nowhere is OpenAI's 503 with the numbers, and
nothing is made; the scheduler decides in milliseconds over 30 laptops and 10 on-call models. No laptops and no
workers: the scheduler's deployments are rows, and what it would send a worker is caught."""

import statistics
import threading
import time

import pytest
from django.test import Client

from jobs import task_messages
from jobs.api import inputs, openai_models
from jobs.models import Job, JobKind, JobStatus
from jobs.queue import oncall_choice, queueing, wakeup
from models_app.models import Deployment, DeploymentStatus, OnCall, OnCallEvent
from models_app.oncall import service as oncall
from nodes.models import Node
from tests.jobs.conftest import bearer
from tests.oncall_rows import GiB, gguf, laptops, on_call, serving

HI = [{"role": "user", "content": "Hello?"}]


def laptops_of(deployment: Deployment) -> set[str]:
    return set(deployment.stages.values_list("node__name", flat=True))


def ask(model: str, user=None) -> Job:
    """A request as the APIs make it: routed to the deployment `target_for` gives, and queued there."""
    target = inputs.target_for(model)
    return queueing.submit(Job(kind=JobKind.CHAT, deployment=target.deployment, user=user, messages=HI))


def test_an_asleep_model_is_planned_onto_free_laptops_and_its_job_waits_on_the_load(
        db, sent, django_capture_on_commit_callbacks):
    model = gguf("small")
    on_call(model, laptops(3), idle_minutes=5)
    assert oncall.state_of(model) == "asleep"
    assert [(m["id"], m["state"]) for m in openai_models.model_list()] == [("small", "asleep")]
    with django_capture_on_commit_callbacks(execute=True):
        job = ask("small")
    deployment = job.deployment
    assert deployment.on_call and deployment.status == DeploymentStatus.PLANNED and len(laptops_of(deployment)) == 1
    assert (task_messages.PREPARE_ON_CALL, (deployment.pk,)) in sent, "a worker prepares it"
    assert (task_messages.RUN_JOB, (job.pk,)) in sent, "the job waits in the engine's queue for the engine to start"
    event = OnCallEvent.objects.get()
    assert (event.kind, event.deployment) == ("load", deployment)
    assert event.why == f"A request asked for it while it was asleep; planned onto {laptops_of(deployment).pop()}."
    assert oncall.state_of(model) == "loading" and wakeup.state_words(job) == "asleep→loading"
    assert [(m["id"], m["state"]) for m in openai_models.model_list()] == [("small", "loading")]
    assert ask("small").deployment == deployment, "a second request waits on the same load"
    serving(deployment)
    assert oncall.state_of(model) == "ready" and wakeup.state_words(job) == "ready"
    assert ask("small").deployment == deployment
    assert Deployment.objects.count() == 1


def test_a_deployment_that_is_not_on_call_still_takes_no_job_before_it_is_ready(db):
    model = gguf("small")
    planned = Deployment.objects.create(model=model, ctx=1024, plan={}, status=DeploymentStatus.PREPARING)
    with pytest.raises(queueing.QueueError, match="is preparing, not ready"):
        queueing.submit(Job(kind=JobKind.CHAT, deployment=planned, messages=HI))


def test_two_requests_at_once_wake_it_once(transactional_db, sent):
    on_call(gguf("small"), laptops(3))
    found, errors = [], []

    def request() -> None:
        try:
            found.append(wakeup.wake("small").pk)
        except Exception as exc:  # the test names it
            errors.append(exc)

    threads = [threading.Thread(target=request) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors and len(found) == 4 and len(set(found)) == 1
    assert Deployment.objects.count() == 1 and [task for task, _ in sent] == [task_messages.PREPARE_ON_CALL]


def test_a_second_model_asleep_while_the_first_is_busy_loads_onto_the_free_laptops(db, sent):
    pool = laptops(3)
    first, second = gguf("first"), gguf("second")
    on_call(first, None)
    on_call(second, None)
    busy = serving(ask("first").deployment)
    Job.objects.filter(deployment=busy).update(status=JobStatus.RUNNING)
    woken = ask("second").deployment
    assert laptops_of(woken) and not laptops_of(woken) & laptops_of(busy)
    assert laptops_of(woken) | laptops_of(busy) <= {node.name for node in pool}
    assert busy.status == DeploymentStatus.READY


def test_a_model_that_fits_nowhere_is_a_503_with_the_numbers_and_nothing_is_made(db, bob, sent):
    model, pool = gguf("small"), laptops(2)
    on_call(model, pool)
    Node.objects.filter(pk=pool[0].pk).update(status="offline")
    Node.objects.filter(pk=pool[1].pk).update(usable_memory=GiB // 2)  # the pool's one ready laptop shrank
    answer = Client().post("/v1/chat/completions", {"model": "small", "messages": HI}, "application/json",
                           **bearer(bob))
    assert answer.status_code == 503
    error = answer.json()["error"]
    assert (error["type"], error["code"], error["param"]) == ("server_error", "model_cannot_load", "model")
    assert error["message"] == (
        "small cannot be loaded anywhere: it needs 920 MiB at a context of 1024 tokens; its pool has 512 MiB usable "
        "on 1 ready laptop even with nothing else loaded, and 512 MiB free now on 1 free laptop. Add laptops to its "
        "pool, or lower its context.")
    assert not Deployment.objects.exists() and not Job.objects.exists() and not sent


def test_the_scheduler_decides_within_50_ms_over_30_laptops_and_10_on_call_models(db, sent):
    laptops(30)
    models = [gguf(f"model-{n}") for n in range(10)]
    for model in models:
        on_call(model, None)
    for model in models[:9]:  # nine loaded, the tenth asleep: it must find the free laptops among them
        serving(wakeup.wake(model.name))
    asleep = OnCall.objects.select_related("model").get(model=models[9])
    times = []
    for _ in range(5):
        began = time.perf_counter()
        choice = oncall_choice.choose(asleep)
        times.append(time.perf_counter() - began)
    assert choice.plan is not None and not choice.evict
    # The target is 50 ms (bench/oncall.py measures it); here, beside other test runs on 2 cores, the
    # median is held to four times that, so a slow neighbour does not fail it while a regression still does.
    assert statistics.median(times) < 0.2, times


def test_with_replicas_it_loads_each_on_laptops_of_its_own_when_they_are_free(db, sent):
    model = gguf("small")
    on_call(model, laptops(3), replicas=2)
    job = ask("small")
    made = list(Deployment.objects.filter(model=model).order_by("pk"))
    assert len(made) == 2 and job.deployment == made[0]
    assert laptops_of(made[0]) and not laptops_of(made[0]) & laptops_of(made[1])
    assert [event.why.split(";")[0] for event in OnCallEvent.objects.order_by("pk")] == [
        "A request asked for it while it was asleep", "Replica 2 of 2, on laptops still free"]
