"""A replica that fails hands its waiting jobs to the others: the jobs routed by model move, in queue order, to
the replica that answers soonest, their listeners still listening (the job keeps its id) and told of the move,
the move written in the job; jobs sent to that one deployment stay, and so does everything when no other replica
answers. A job a laptop's death failed is retried on another replica; an engine that restarts under its jobs
sends its routed ones elsewhere; routed jobs left on a stopped replica move when the supervisor stops its engine,
or when the panel starts. A stream that follows a retry mid-answer sends only what the client does not have, and
stops in words when the retry says something else. No laptops: deployments are rows."""

import subprocess

from asgiref.sync import async_to_sync, sync_to_async

from jobs.api.caught import Caught, text_parted
from jobs.engine import leftovers, recovery
from jobs.engine.workers import Engines
from jobs.models import STOPPED, Job, JobKind, JobStatus
from jobs.queue import ending, failover, queueing, routing
from jobs.queue.listen import JobEvents
from models_app.models import Deployment, DeploymentStatus
from tests.jobs.conftest import as_engine_child
from tests.jobs.queue.test_replica_routing import HI

WHY = "desk-1 stopped answering"


def job(deployment: Deployment, user, status: str = JobStatus.QUEUED, routed: bool = True, **fields) -> Job:
    params = {"max_tokens": 16, "temperature": 0.0}
    return Job.objects.create(kind=JobKind.CHAT, deployment=deployment, user=user, messages=HI, status=status,
                              params=routing.routed(params, "tiny") if routed else params, **fields)


def test_a_failing_replica_hands_its_routed_waiting_jobs_over_and_their_listeners_hear_it(replicas, bob, alice):
    first, second = replicas
    running = job(first, bob, JobStatus.RUNNING, attempts=1)
    routed = [job(first, bob), job(first, alice), job(first, None)]
    pinned = job(first, bob, routed=False)

    async def listen_through_the_move() -> dict:
        listener = await JobEvents(routed[1].pk).open()
        try:
            moved = await sync_to_async(failover.move_waiting)(first, WHY)
            assert moved == [job.pk for job in routed], "every routed waiting job, in queue order"
            events = listener.events()
            event = await anext(events)
            while event["event"] != "moved":
                event = await anext(events)
            await events.aclose()
            return event
        finally:
            await listener.close()

    heard = async_to_sync(listen_through_the_move)()
    assert heard == {"event": "moved", "from": first.pk, "to": second.pk, "why": WHY}
    for moved in Job.objects.filter(pk__in=[job.pk for job in routed]):
        assert moved.deployment == second and moved.status == JobStatus.QUEUED
        (line,) = moved.params["routing"]["moves"]
        assert (line["from"], line["to"], line["why"]) == (first.pk, second.pk, WHY) and line["at"]
    assert Job.objects.get(pk=pinned.pk).deployment == first, "sent to that deployment: it stays"
    assert Job.objects.get(pk=running.pk).deployment == first, "running: recovery's, not failover's"
    assert queueing.position(Job.objects.get(pk=routed[0].pk)) == 1, "first in line where it went"
    assert queueing.claim(routed[0].pk, first.pk) is None, "the engine it left cannot take it any more"
    assert queueing.claim_next(first.pk) == pinned and queueing.claim_next(first.pk) is None


def test_with_no_other_replica_answering_the_jobs_stay(replicas, bob):
    first, second = replicas
    waiting = job(first, bob)
    second.set_status(DeploymentStatus.DEGRADED, "lab-2 failed. Re-planning.")
    assert failover.move_waiting(first, WHY) == [], "one being recovered too is no place to move to"
    second.set_status(DeploymentStatus.STOPPED, "Stopped by alice.")
    assert failover.move_waiting(first, WHY) == []
    assert Job.objects.get(pk=waiting.pk).deployment == first


def test_a_job_a_laptops_death_failed_is_retried_on_another_replica(replicas, bob, settings):
    settings.JOB_RETRIES = 1
    first, second = replicas
    error = f"{STOPPED} desk-1 stopped answering during generation (killed)."
    routed, pinned = (job(first, bob, JobStatus.FAILED, routed=flag, error=error) for flag in (True, False))
    recovery.retry([routed.pk, pinned.pk])
    again = Job.objects.get(retry_of=routed)
    assert again.deployment == second and again.status == JobStatus.QUEUED
    assert [(m["from"], m["to"]) for m in again.params["routing"]["moves"]] == [(first.pk, second.pk)]
    assert Job.objects.get(retry_of=pinned).deployment == first, "sent to that deployment: retried there"
    recovery.retry([routed.pk])
    assert Job.objects.filter(retry_of=routed).count() == 1, "a job is retried once, however often asked"


def test_a_replica_whose_laptop_died_retries_its_routed_jobs_elsewhere_at_once(replicas, bob, settings):
    settings.JOB_RETRIES = 1
    first, second = replicas
    interrupted = [job(first, bob, JobStatus.RUNNING, attempts=1), job(first, bob, JobStatus.RUNNING,
                                                                       routed=False, attempts=1)]
    waiting = job(first, bob)
    left = recovery.hand_off(first, {"desk-1": "its rpc-server ended: killed (signal 9)"}, interrupted)
    assert left == interrupted[1:], "the job sent to this deployment waits for its recovery"
    failed = Job.objects.get(pk=interrupted[0].pk)
    assert failed.status == JobStatus.FAILED and failed.error.startswith(f"{STOPPED} desk-1")
    assert failed.retry.deployment == second and failed.retry.status == JobStatus.QUEUED
    assert recovery.retry_state(failed.pk) == (False, failed.retry.pk), "a listener follows it at once"
    assert Job.objects.get(pk=waiting.pk).deployment == second


def test_routed_jobs_left_on_a_stopped_replica_move_when_the_panel_starts(replicas, bob):
    first, second = replicas
    routed, pinned = job(first, bob), job(first, bob, routed=False)
    first.set_status(DeploymentStatus.STOPPED, "Stopped by alice.")
    assert failover.rescue_abandoned() == 1
    ending.settle_abandoned()
    assert Job.objects.get(pk=routed.pk).deployment == second
    assert Job.objects.get(pk=routed.pk).status == JobStatus.QUEUED
    assert Job.objects.get(pk=pinned.pk).status == JobStatus.FAILED


def test_a_stream_following_a_retry_sends_only_what_the_client_lacks():
    caught = Caught("Hello, wor")
    assert [caught.new(piece) for piece in ("Hel", "lo, ", "wor", "ld", "!")] == ["", "", "", "ld", "!"]
    straddling = Caught("Hello")
    assert straddling.new("Hel") == "" and straddling.new("lo there") == " there"
    assert Caught("").new("Hi") == "Hi", "nothing sent yet: everything is new"
    parted = Caught("Hello, world")
    assert parted.new("Hello") == "" and parted.new(", moon") is None, "the retry said something else"
    assert text_parted({"event": "token", "text": ", moon"}, parted)
    done = {"event": "done", "status": JobStatus.SUCCEEDED, "output": "Hello"}
    assert text_parted(done, Caught("Hello, world")), "the retry ended short of what was sent"
    assert not text_parted({**done, "output": "Hello, world!"}, Caught("Hello, world"))
    assert not text_parted({**done, "status": JobStatus.FAILED, "output": ""}, Caught("Hello")), \
        "a failure is told as a failure"


def test_an_engine_that_restarts_under_its_jobs_sends_its_routed_ones_elsewhere(replicas, bob, monkeypatch,
                                                                               transactional_db):
    first, second = replicas
    running, waiting = job(first, bob, JobStatus.RUNNING, attempts=1), job(first, bob)
    monkeypatch.setattr(recovery, "dead_laptops", lambda deployment: {})  # the engine itself stopped
    as_engine_child(first, monkeypatch)
    leftovers.on_child_start()
    for moved in Job.objects.filter(pk__in=[running.pk, waiting.pk]):
        assert moved.status == JobStatus.QUEUED and moved.deployment == second, (moved.pk, moved.status)
    assert Deployment.objects.get(pk=first.pk).engine["state"] == "restarting", "no new job is routed to it"


def test_the_supervisor_stopping_a_stopped_replicas_engine_moves_its_routed_jobs(replicas, bob, transactional_db):
    first, second = replicas
    routed, pinned = job(first, bob), job(first, bob, routed=False)
    first.set_status(DeploymentStatus.STOPPED, "Stopped by alice.")
    engines = Engines()
    engines.running[first.pk] = (first.revision, subprocess.Popen(["sleep", "60"], start_new_session=True))
    engines.stop(first.pk)
    assert Job.objects.get(pk=routed.pk).deployment == second
    assert Job.objects.get(pk=pinned.pk).status == JobStatus.FAILED, "sent to that deployment: it ends with it"
