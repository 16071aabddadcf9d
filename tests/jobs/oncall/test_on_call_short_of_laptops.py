"""When an asleep model's pool has no free laptop for it: under "evict" the least recently used idle on-call
deployment is stopped to make room, never one with a job queued or running; under "wait" the request waits on a
deployment that holds no laptop yet, saying so, until the look-after (celery beat) unloads an idle deployment and
places it. Idle deployments are unloaded after their idle time, busy ones never; a load that fails ends the jobs
waiting for it in words. No laptops and no workers: deployments are rows, and what would go to a worker is caught."""

from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.utils import timezone

from clusterpanel.kit.celery import app
from jobs.api.views import described
from jobs.models import Job, JobKind, JobStatus
from jobs.queue import ending, oncall_choice, queueing, wakeup
from models_app.deploying import deploy
from models_app.models import Deployment, DeploymentStatus, OnCall, OnCallEvent
from models_app.oncall import service as oncall
from nodes.models import RpcServer
from tests.oncall_rows import gguf, laptops, on_call, serving
from tests.rows import client_for

HI = [{"role": "user", "content": "Hello?"}]


def used(deployment: Deployment, minutes_ago: float, status: str = JobStatus.SUCCEEDED) -> Deployment:
    """A job on it, made and (unless still waiting or running) ended `minutes_ago`."""
    at = timezone.now() - timedelta(minutes=minutes_ago)
    ended = at if status in (JobStatus.SUCCEEDED, JobStatus.FAILED) else None
    Job.objects.create(kind=JobKind.CHAT, deployment=deployment, messages=HI, status=status, created=at, finished=ended)
    OnCallEvent.objects.filter(deployment=deployment).update(at=at)  # loaded before it was used
    return deployment


@pytest.fixture
def full_lab(db, sent):
    """Three laptops, each holding one on-call model (idle time 60 minutes): `busy` (used longest ago, but a job
    waits on it), `older` (idle for 30 minutes) and `newer` (idle for 1 minute); a fourth model, `late`, is asleep."""
    laptops(3)
    deployments = {}
    for name, minutes, status in (("busy", 90, JobStatus.QUEUED), ("older", 30, JobStatus.SUCCEEDED),
                                  ("newer", 1, JobStatus.SUCCEEDED)):
        on_call(gguf(name), None, idle_minutes=60)
        deployments[name] = used(serving(wakeup.wake(name)), minutes, status)
    on_call(gguf("late"), None)
    return deployments


def laptops_of(deployment: Deployment) -> set[str]:
    return set(deployment.stages.values_list("node__name", flat=True))


def ask(model: str) -> Job:
    return queueing.submit(Job(kind=JobKind.CHAT, deployment=wakeup.wake(model), messages=HI))


def test_the_eviction_choice_is_the_least_recently_used_idle_deployment_never_a_busy_one(full_lab):
    choice = oncall_choice.choose(OnCall.objects.get(model__name="late"))
    assert choice.plan is not None and choice.evict == [full_lab["older"]]
    assert laptops_of(full_lab["older"]) == {node.name for node in choice.nodes}
    Job.objects.create(kind=JobKind.CHAT, deployment=full_lab["older"], messages=HI, status=JobStatus.RUNNING)
    Job.objects.create(kind=JobKind.CHAT, deployment=full_lab["newer"], messages=HI, status=JobStatus.QUEUED)
    choice = oncall_choice.choose(OnCall.objects.get(model__name="late"))
    assert choice.plan is None and choice.evict == [] and set(choice.busy) == set(full_lab.values())


def test_evict_stops_the_least_recently_used_idle_deployment_to_make_room(full_lab):
    OnCall.objects.filter(model__name="late").update(when_short="evict")
    job = ask("late")
    older = Deployment.objects.get(pk=full_lab["older"].pk)
    assert older.status == DeploymentStatus.STOPPED and older.status_detail.startswith(
        "Evicted to make room for late: the least recently used idle deployment of its pool")
    assert laptops_of(job.deployment) == laptops_of(older) and job.deployment.status == DeploymentStatus.PLANNED
    kept = Deployment.objects.filter(pk__in=[full_lab["busy"].pk, full_lab["newer"].pk])
    assert set(kept.values_list("status", flat=True)) == {DeploymentStatus.READY}
    assert list(OnCallEvent.objects.filter(kind="evict").values_list("model__name", flat=True)) == ["older"]


def test_wait_queues_the_request_until_an_idle_deployment_is_unloaded(full_lab, settings):
    job = ask("late")
    waiting = job.deployment
    assert oncall.is_waiting(waiting) and not laptops_of(waiting)
    assert wakeup.state_words(job) == (
        f"waiting for laptops (the free laptops of its pool cannot hold it, and it waits (its policy) until idle "
        f"#{full_lab['older'].pk} of older is unloaded or stopped)")
    assert oncall.state_of(waiting.model) == "loading"
    assert described(job)["waiting_on"] == wakeup.state_words(job), "/api/jobs/ says so too"
    assert ask("late").deployment == waiting, "a second request waits on the same deployment"
    assert wakeup.look_after() == {"unloaded": 0, "placed": 0, "ended": 0, "resent": 0}, \
        "nobody has been idle for an hour"
    settings.ONCALL_IDLE_MINUTE_S = 20  # an idle time of 1200 s: "older" has been idle 1800 s, "newer" 60
    assert wakeup.look_after() == {"unloaded": 1, "placed": 1, "ended": 0, "resent": 0}
    waiting.refresh_from_db()
    assert laptops_of(waiting) and not oncall.is_waiting(waiting) and waiting.status == DeploymentStatus.PLANNED
    statuses = dict(Deployment.objects.filter(pk__in=[d.pk for d in full_lab.values()])
                    .values_list("model__name", "status"))
    assert statuses == {"busy": "ready", "older": "stopped", "newer": "ready"}, "one with a job stays, however old"
    assert "Laptops of its pool came free" in OnCallEvent.objects.get(deployment=waiting, kind="load").why


def test_idle_unload_stops_its_rpc_servers_and_says_why(full_lab, settings):
    stage = full_lab["older"].stages.get()
    stage.server = RpcServer.objects.create(node=stage.node, port=50052, wanted=True)
    stage.save()
    settings.ONCALL_IDLE_MINUTE_S = 20
    assert [d.model.name for d, _ in oncall_choice.idle_too_long(60)] == []
    assert [d.model.name for d, _ in oncall_choice.idle_too_long(20)] == ["older"]
    assert wakeup.look_after()["unloaded"] == 1
    assert not RpcServer.objects.get(node=stage.node).wanted, "the supervisor stops it: the memory is free again"
    event = OnCallEvent.objects.get(kind="unload")
    assert event.why == "No job for 90 min (its idle time is 60 min): unloaded, its laptops' memory free again."
    assert Deployment.objects.get(pk=full_lab["older"].pk).status == DeploymentStatus.STOPPED


def test_a_load_that_fails_ends_the_jobs_waiting_for_it_in_words(db, sent, monkeypatch):
    laptops(1)
    on_call(gguf("small"), None)
    job = ask("small")

    def fails(deployment, measure_peak=False):
        deploy.stop(deployment, DeploymentStatus.FAILED, "rpc-servers did not come up within 120 s.")

    monkeypatch.setattr(deploy, "prepare", fails)
    assert wakeup.prepare(job.deployment.pk) == DeploymentStatus.FAILED
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert job.error == "Its deployment failed before it ran. rpc-servers did not come up within 120 s."
    assert OnCallEvent.objects.filter(kind="failed", deployment=job.deployment).exists()
    with pytest.raises(queueing.QueueError):  # a failed load takes no more jobs; the next request loads again
        queueing.submit(Job(kind=JobKind.CHAT, deployment=job.deployment, messages=HI))
    assert ask("small").deployment != job.deployment


def test_celery_beat_asks_for_the_look_after_and_a_deployment_nobody_waits_for_is_given_up(full_lab):
    app.loader.import_default_modules()
    scheduled = {entry["task"] for entry in django_settings.CELERY_BEAT_SCHEDULE.values()}
    assert "jobs.tasks.look_after_on_call" in scheduled and "jobs.tasks.look_after_on_call" in app.tasks
    woken = wakeup.wake("late")  # as /v1/batches does: its lines are saved in a transaction of their own
    wakeup.look_after()
    woken.refresh_from_db()
    assert oncall.is_waiting(woken), "one just made may not have its first job yet: kept a while"
    Deployment.objects.filter(pk=woken.pk).update(created=timezone.now() - timedelta(minutes=2))
    wakeup.look_after()
    woken.refresh_from_db()
    assert woken.status == DeploymentStatus.STOPPED, "still nobody after a while: given up"
    job = ask("late")
    ending.cancel(job)
    wakeup.look_after()
    job.deployment.refresh_from_db()
    assert job.deployment.status == DeploymentStatus.STOPPED
    assert job.deployment.status_detail == "Nobody waits for it any more."


def test_a_deployment_waiting_for_laptops_reads_on_its_pages(full_lab, alice):
    waiting = ask("late").deployment
    page = client_for(alice)
    for path in (f"/models/deployments/{waiting.pk}/", "/models/deployments/", "/", "/models/late/"):
        answer = page.get(path)
        assert answer.status_code == 200, (path, answer.status_code)
    assert b"Waiting for laptops: the free laptops of its pool cannot hold it" in page.get(
        f"/models/deployments/{waiting.pk}/").content
    assert b"Waiting for laptops" in page.get("/models/late/").content, "the model's page lists the record"
    detail = page.get(f"/api/deployments/{waiting.pk}/")
    assert detail.status_code == 200 and detail.json()["status"] == "planned"
