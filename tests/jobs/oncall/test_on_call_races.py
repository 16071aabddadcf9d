"""The on-call scheduler where requests and its own look-after cross: a job saved as an idle deployment is
unloaded is never left on the stopped one (the request goes to a woken one instead); a lost message to prepare
a woken deployment is sent again; a request refused (over its limits, or asking more tokens than the context)
loads nothing; laptops serving a deployment made by hand are never waited for; a stream waiting on a load says
what the load is doing. No laptops and no workers: deployments are rows, and messages to workers are caught."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from kombu.exceptions import OperationalError

from clusterpanel.accounts.limits import set_limits
from jobs import task_messages
from jobs.api import inputs, openai_api
from jobs.api.openai_submit import submit
from jobs.models import Job, JobKind, JobStatus
from jobs.queue import queueing, wakeup
from jobs.queue.oncall_choice import probed
from jobs.queue.standing import standing
from models_app.deploying import deploy
from models_app.models import Deployment, DeploymentStatus, OnCallEvent
from models_app.oncall import service as oncall
from tests.jobs.conftest import bearer
from tests.oncall_rows import gguf, laptops, on_call, serving

HI = [{"role": "user", "content": "Hello?"}]


def request(model: str, **more) -> openai_api.Request:
    return openai_api.parse({"model": model, "messages": HI, **more}, JobKind.CHAT)


def test_a_job_on_a_deployment_keeps_it_from_being_unloaded_and_one_unloaded_takes_no_job(db, sent):
    on_call(gguf("small"), laptops(1))
    deployment = serving(wakeup.wake("small"))
    queueing.submit(Job(kind=JobKind.CHAT, deployment=deployment, messages=HI))
    assert not wakeup.stop_if_idle(deployment, "unload", "idle"), "a queued job keeps it"
    Job.objects.update(status=JobStatus.SUCCEEDED)
    chosen = Deployment.objects.get(pk=deployment.pk)  # as a request routed it, a moment before the unload
    assert wakeup.stop_if_idle(deployment, "unload", "idle")
    with pytest.raises(queueing.DeploymentGone):
        queueing.submit(Job(kind=JobKind.CHAT, deployment=chosen, messages=HI))
    assert Job.objects.filter(deployment=deployment).count() == 1, "nothing saved on the stopped one"


def test_a_request_routed_to_a_deployment_stopped_before_its_job_is_saved_wakes_the_model(db, sent, bob,
                                                                                          monkeypatch):
    on_call(gguf("small"), laptops(1))
    first = serving(wakeup.wake("small"))
    as_routed = Deployment.objects.get(pk=first.pk)  # what the routing read: ready
    assert wakeup.stop_if_idle(first, "unload", "idle")  # committed by another process after the routing read it
    route, calls = inputs.target_for, []

    def read_before_the_stop(model, tokens=None):
        calls.append(model)
        return inputs.Target(as_routed, model) if len(calls) == 1 else route(model, tokens)

    monkeypatch.setattr(inputs, "target_for", read_before_the_stop)
    job, model = submit(bob, None, request("small"))
    assert len(calls) == 2 and model == "small" and job.deployment != first and job.deployment.on_call
    assert job.deployment.status == DeploymentStatus.PLANNED, "woken again: its job waits on the new load"
    assert not Job.objects.filter(deployment=first).exists()


def test_a_lost_message_to_prepare_a_woken_deployment_is_sent_again(db, sent, monkeypatch,
                                                                     django_capture_on_commit_callbacks):
    on_call(gguf("small"), laptops(1))

    def broker_down(deployment_id):
        raise OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(task_messages, "prepare_on_call", broker_down)
    with django_capture_on_commit_callbacks(execute=True):
        woken = wakeup.wake("small")  # the request is not failed: its job waits on the load
    monkeypatch.undo()
    monkeypatch.setattr(task_messages, "send", lambda task, args, **options: sent.append((task, args)))
    assert wakeup.look_after()["resent"] == 0, "a load just recorded is given time"
    OnCallEvent.objects.filter(deployment=woken).update(at=timezone.now() - timedelta(minutes=2))
    assert wakeup.look_after()["resent"] == 1
    assert (task_messages.PREPARE_ON_CALL, (woken.pk,)) in sent
    Deployment.objects.filter(pk=woken.pk).update(status=DeploymentStatus.PREPARING)
    assert wakeup.look_after()["resent"] == 0, "one a worker took is left to it"


def test_a_request_refused_loads_nothing(db, sent, bob):
    on_call(gguf("small"), laptops(1), ctx=1024)
    client = Client()
    too_many = client.post("/v1/chat/completions", {"model": "small", "messages": HI, "max_tokens": 4096},
                           "application/json", **bearer(bob))
    assert too_many.status_code == 400 and too_many.json()["error"]["param"] == "max_tokens", too_many.json()
    assert "context of 1024 tokens" in too_many.json()["error"]["message"]
    set_limits(bob, {"concurrent_jobs": 1})
    Job.objects.create(kind=JobKind.CHAT, user=bob, status=JobStatus.RUNNING, messages=HI)
    over = client.post("/v1/chat/completions", {"model": "small", "messages": HI, "max_tokens": 4},
                       "application/json", **bearer(bob))
    assert over.status_code == 429, over.content
    assert not Deployment.objects.exists() and not OnCallEvent.objects.exists(), "nothing woken for a refused one"


def test_laptops_serving_a_deployment_made_by_hand_are_never_waited_for(db, sent):
    pool = laptops(2)
    hand = gguf("hand")
    machines = {}
    probed(pool[:1], machines)
    serving(deploy.record(hand, oncall.plan_on(hand, pool[:1], machines, 1024, 1), pool[:1], 1024))
    on_call(gguf("big", layers=24), pool)  # about 2.4 GiB: it needs both laptops
    with pytest.raises(wakeup.NoRoom) as refused:
        wakeup.wake("big")
    assert "1 more laptop of its pool serves deployments made by hand" in str(refused.value), str(refused.value)
    assert not Deployment.objects.filter(model__name="big").exists()


def test_a_stream_waiting_on_a_load_says_what_the_load_is_doing(db, sent):
    on_call(gguf("small"), laptops(1))
    job = queueing.submit(Job(kind=JobKind.CHAT, deployment=wakeup.wake("small"), messages=HI))
    assert standing(job.pk) == (f"queued, next in line on deployment #{job.deployment_id}; on call, "
                                "asleep→loading: the deployment is planned")
    Deployment.objects.filter(pk=job.deployment_id).update(status=DeploymentStatus.READY,
                                                           engine={"state": "loading", "progress": 0.5})
    assert standing(job.pk).endswith("on call, asleep→loading: its model is loading (50 %)")
    serving(job.deployment)
    Deployment.objects.filter(pk=job.deployment_id).update(engine={"state": "ready", "slots": 1, "busy": 1})
    assert standing(job.pk).endswith("; 1 of its 1 slots busy"), "ready: the slots, as for any deployment"
