"""The on-call scheduler acting: a request naming an asleep on-call model wakes it, and a periodic look-after
(celery beat, ONCALL_CHECK_EVERY_S) unloads idle deployments and places those waiting for laptops.

A woken model gets a deployment at once, which the request's job queues on: planned onto free laptops of its
pool and prepared by a worker (`prepare`, the deploy views' own `deploy.prepare`), its engine started by the
supervisor once it is ready, which then runs the jobs waiting for it; or, when laptops are short and its policy
is "wait" (or every laptop it could use is held by deployments with jobs), a deployment that holds no laptop yet
and waits, saying for what, until the look-after can place it. Under "evict" the least recently used idle
on-call deployments are stopped first; one with jobs never is (`stop_if_idle` checks again as it stops). A load
that fails ends the jobs waiting for it, saying why. Every load, unload and eviction is recorded with when and
why (models_app/oncall/service.py `record`), and `state_words` says where a job's deployment stands, for clients that
wait.
"""

import logging
import time
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Subquery
from django.utils import timezone
from kombu.exceptions import KombuError
from redis.exceptions import RedisError

from jobs import task_messages
from jobs.models import Job, JobStatus
from jobs.queue import ending, failover, queueing
from jobs.queue.oncall_choice import BUSY, Choice, Room, choose, idle_too_long, last_used
from models_app.deploying import deploy
from models_app.models import Deployment, DeploymentStatus, OnCall, OnCallEvent, WhenShort
from models_app.models import OnCallEventKind as Kind
from models_app.oncall import service as oncall

log = logging.getLogger(__name__)
UNPREPARED_S = 60  # a woken deployment not yet prepared after this long has lost its message; a waiting one this
# young may not have its first job yet


class NoRoom(Exception):
    """The model fits nowhere, even with nothing else loaded on its pool: nothing was made."""

    def __init__(self, room: Room) -> None:
        super().__init__(room.words())
        self.room = room


class TooLong(Exception):
    """The request asks for more tokens than the model's on-call context: refused before anything loads."""


def wake(model_name: str, tokens: int | None = None) -> Deployment | None:
    """The deployment a request for `model_name` (asking for up to `tokens`) queues on when the model is on call
    and nothing of it serves: one being woken already, or one made now (loading, or waiting for laptops). None
    when the model is not on call or a deployment of it serves (routing picks). Two requests at once make one
    (`one_at_a_time`)."""
    if not OnCall.objects.filter(model__name=model_name).exists() or serving(model_name):
        return None  # most requests: read without taking the lock
    with transaction.atomic():
        one_at_a_time()
        on_call = OnCall.objects.select_related("model").filter(model__name=model_name).first()
        if on_call is None or serving(model_name):
            return None
        if tokens is not None and tokens > on_call.ctx:
            raise TooLong(f"max_tokens is {tokens}, more than the context of {on_call.ctx} tokens {model_name} "
                          f"loads with when it is woken (its on-call setting): ask for at most {on_call.ctx}.")
        waking = (Deployment.objects.filter(model=on_call.model, on_call=True, status__in=oncall.WAKING)
                  .order_by("created", "pk").first())
        return waking or load(on_call, "A request asked for it while it was asleep")


def one_at_a_time() -> None:
    """The scheduler decides one thing at a time, until the transaction ends: every on-call row locked, in one
    order (PostgreSQL), so two models woken at once never plan onto the same free laptop and one model is never
    woken twice. SQLite's transactions here are IMMEDIATE: they take turns already."""
    list(OnCall.objects.select_for_update().order_by("pk").values_list("pk", flat=True))


def serving(model_name: str) -> bool:
    return queueing.usable_deployments(offline_too=True).filter(model__name=model_name).exists()


def load(on_call: OnCall, why: str) -> Deployment:
    """A new deployment of the on-call model: loading onto free laptops (evicting first under "evict"), or
    waiting for laptops. NoRoom when it fits nowhere."""
    choice = make_room(on_call, choose(on_call))
    if choice.plan is None or choice.evict:
        reason = waiting_words(on_call, choice)
        deployment = oncall.waiting_deployment(on_call.model, on_call, reason)
        oncall.record(on_call.model, deployment, Kind.WAIT, f"{why}; {reason}")
        return deployment
    deployment = start(on_call, choice, why)
    more_replicas(on_call)
    return deployment


def make_room(on_call: OnCall, choice: Choice) -> Choice:
    """Under "evict", the idle deployments whose laptops it needs stopped, and where it would load now."""
    if choice.no_room:
        raise NoRoom(choice.no_room)
    if choice.plan is None or not choice.evict or on_call.when_short != WhenShort.EVICT:
        return choice
    for deployment in sorted(choice.evict, key=lambda d: d.pk):  # rows in id order, as routing holds them
        stop_if_idle(deployment, Kind.EVICT, f"Evicted to make room for {on_call.model.name}: the least recently "
                                             f"used idle deployment of its pool (no job since "
                                             f"{last_used(deployment):%Y-%m-%d %H:%M:%S} UTC).")
    again = choose(on_call)  # one that took a job meanwhile was kept: its laptops are not free
    if again.no_room:
        raise NoRoom(again.no_room)
    return again


def start(on_call: OnCall, choice: Choice, why: str, waiting: Deployment | None = None) -> Deployment:
    """The chosen plan recorded (on the waiting deployment, if one is given) and prepared once committed."""
    model = on_call.model
    if waiting is None:
        deployment = deploy.record(model, choice.plan, choice.nodes, on_call.ctx, on_call=True)
    else:
        oncall.place(waiting, choice.plan, choice.nodes)
        deployment = waiting
    laptops = ", ".join(stage.node.name for stage in deployment.stages.select_related("node"))
    oncall.record(model, deployment, Kind.LOAD, f"{why}; planned onto {laptops}.")
    transaction.on_commit(lambda: send_prepare(deployment.pk))
    return deployment


def send_prepare(deployment_id: int) -> None:
    """Ask a worker to prepare it. With the broker unreachable the request still gets its answer (a wait): the
    look-after sends it again (`resend_unprepared`)."""
    try:
        task_messages.prepare_on_call(deployment_id)
    except (KombuError, RedisError, OSError) as exc:
        log.warning("deployment %s: could not ask a worker to prepare it (%s); the look-after asks again",
                    deployment_id, exc)


def resend_unprepared(now=None) -> int:
    """Woken deployments still PLANNED well after their load was recorded: the message to prepare them was lost
    (the broker down as it was sent, or restarted before a worker took it). Sent again; a second delivery is
    harmless (`deploy.claim`). How many."""
    cutoff = (now or timezone.now()) - timedelta(seconds=UNPREPARED_S)
    loaded = OnCallEvent.objects.filter(deployment=OuterRef("pk"), kind=Kind.LOAD).order_by("-at").values("at")[:1]
    stale = [deployment for deployment in (
        Deployment.objects.filter(on_call=True, status=DeploymentStatus.PLANNED)
        .annotate(load_at=Subquery(loaded)).filter(load_at__lt=cutoff).only("pk", "plan", "status"))
        if not oncall.is_waiting(deployment)]
    for deployment in stale:
        send_prepare(deployment.pk)
    return len(stale)


def more_replicas(on_call: OnCall) -> None:
    """Its other replicas, on the free laptops that are left (never by evicting or waiting)."""
    holding = Deployment.objects.filter(model=on_call.model, on_call=True, status__in=oncall.WAKING + oncall.SERVING)
    for number in range(holding.count() + 1, on_call.replicas + 1):
        choice = choose(on_call)
        if choice.plan is None or choice.evict:
            return
        start(on_call, choice, f"Replica {number} of {on_call.replicas}, on laptops still free")


def waiting_words(on_call: OnCall, choice: Choice) -> str:
    if choice.plan is not None:
        held = ", ".join(f"#{d.pk} of {d.model.name}" for d in choice.evict)
        return (f"the free laptops of its pool cannot hold it, and it waits (its policy) until idle {held} "
                "is unloaded or stopped")
    busy = ", ".join(f"#{d.pk} of {d.model.name}" for d in choice.busy) or "none now"
    return ("the free laptops of its pool cannot hold it, even with every idle deployment gone; it waits until a "
            f"deployment with jobs ({busy}) is idle and unloaded, or stopped")


def stop_if_idle(deployment: Deployment, kind: str, why: str) -> bool:
    """Stop an on-call deployment that is still ready with no job queued or running; whether it was."""
    busy = Job.objects.filter(deployment=OuterRef("pk"), status__in=BUSY)
    with transaction.atomic():
        # The row held first, as `queueing.submit` holds it to save a job: a job saved meanwhile is seen here.
        list(Deployment.objects.select_for_update().filter(pk=deployment.pk).values_list("pk", flat=True))
        still = Deployment.objects.filter(pk=deployment.pk, status=DeploymentStatus.READY).exclude(Exists(busy))
        if not still.exists():
            return False
        deploy.stop(deployment, DeploymentStatus.STOPPED, why)
        oncall.record(deployment.model, deployment, kind, why)
    return True


def look_after() -> dict[str, int]:
    """What celery beat asks for every ONCALL_CHECK_EVERY_S: idle deployments unloaded, waiting ones placed, jobs
    left on failed loads ended. How many of each."""
    unloaded = sum(unload(deployment, idle_s) for deployment, idle_s in idle_too_long(settings.ONCALL_IDLE_MINUTE_S))
    placed = sum(place(deployment) for deployment in waiting_deployments())
    return {"unloaded": unloaded, "placed": placed, "ended": settle_failed(), "resent": resend_unprepared()}


def unload(deployment: Deployment, idle_s: float) -> bool:
    minutes = deployment.model.on_call.idle_minutes
    return stop_if_idle(deployment, Kind.UNLOAD, f"No job for {idle_s / settings.ONCALL_IDLE_MINUTE_S:.0f} min "
                                                 f"(its idle time is {minutes} min): unloaded, its laptops' memory "
                                                 "free again.")


def waiting_deployments() -> list[Deployment]:
    planned = Deployment.objects.filter(on_call=True, status=DeploymentStatus.PLANNED).select_related("model")
    return [deployment for deployment in planned.order_by("created", "pk") if oncall.is_waiting(deployment)]


def place(waiting: Deployment) -> bool:
    """A deployment waiting for laptops placed if it now fits (evicting under "evict"); given up when nobody
    waits for it any more, its model is off call, or it fits nowhere. Whether it was placed."""
    with transaction.atomic():
        one_at_a_time()
        on_call = OnCall.objects.filter(model=waiting.model_id).first()
        if on_call is None:
            return give_up(waiting, DeploymentStatus.STOPPED, "Its model was taken off call while it waited.")
        # A young one's first job may not be saved yet (the request that woke it queues after the wake commits).
        young = waiting.created > timezone.now() - timedelta(seconds=UNPREPARED_S)
        jobs = Job.objects.filter(deployment=waiting)
        if not jobs.filter(status=JobStatus.QUEUED).exists() and (not young or jobs.exists()):
            return give_up(waiting, DeploymentStatus.STOPPED, "Nobody waits for it any more.")
        try:
            choice = make_room(on_call, choose(on_call))
        except NoRoom as exc:
            return give_up(waiting, DeploymentStatus.FAILED, str(exc))
        if choice.plan is None or choice.evict:
            detail = f"Waiting for laptops: {waiting_words(on_call, choice)}"
            if detail != waiting.status_detail:
                waiting.set_status(DeploymentStatus.PLANNED, detail)
            return False
        start(on_call, choice, "Laptops of its pool came free", waiting)
    return True


def give_up(deployment: Deployment, status: str, why: str) -> bool:
    deploy.stop(deployment, status, why)
    oncall.record(deployment.model, deployment, Kind.FAILED if status == DeploymentStatus.FAILED else Kind.UNLOAD,
                  why)
    transaction.on_commit(lambda: end_waiting(deployment, why))
    return False


def end_waiting(deployment: Deployment, why: str) -> None:
    """Its waiting jobs go to a replica that serves, or end saying why (no engine will ever take them)."""
    failover.move_waiting(deployment, why)
    ending.settle_abandoned(deployment.pk)


def settle_failed() -> int:
    """Jobs still waiting on on-call deployments that stopped or failed before any engine ran them (a request that
    came as its load failed): moved or ended. How many deployments had some."""
    left = (Deployment.objects.filter(on_call=True, status__in=queueing.GONE, engine={},
                                      jobs__status=JobStatus.QUEUED).distinct())
    for deployment in left:
        end_waiting(deployment, f"its load {deployment.get_status_display().lower()}")
    return len(left)


def prepare(deployment_id: int) -> str:
    """Prepare a woken deployment in this worker (the deploy views' path), and record how it went; a load that
    failed ends the jobs waiting for it."""
    deployment = Deployment.objects.select_related("model").get(pk=deployment_id)
    if deployment.status != DeploymentStatus.PLANNED or oncall.is_waiting(deployment):
        return deployment.status  # a second delivery (or a resend) after another prepared it: that one records
    began = time.monotonic()
    deploy.prepare(deployment)
    deployment.refresh_from_db()
    if deployment.status == DeploymentStatus.READY:
        oncall.record(deployment.model, deployment, Kind.LOADED,
                      f"Prepared in {time.monotonic() - began:.0f} s; its engine loads it next.")
    elif deployment.status == DeploymentStatus.FAILED:
        oncall.record(deployment.model, deployment, Kind.FAILED, deployment.status_detail)
        end_waiting(deployment, f"its load failed: {deployment.status_detail}")
    return deployment.status


def state_words(job: Job) -> str:
    """Where the job's deployment stands, in words for a client that waits: "ready"; "asleep→loading" (an on-call
    model woken for requests: being planned, prepared, loaded, its engine starting); "loading" (another
    deployment loading, or its engine reloading); "waiting for laptops (why)"; else its status ("failed")."""
    deployment = Deployment.objects.filter(pk=job.deployment_id).only("status", "on_call", "plan", "engine",
                                                                         "status_detail").first()
    if deployment is None:
        return "gone"
    if oncall.is_waiting(deployment):
        return f"waiting for laptops ({deployment.status_detail.removeprefix('Waiting for laptops: ')})"
    if deployment.status in oncall.WAKING:
        return "asleep→loading" if deployment.on_call else "loading"
    if deployment.status in oncall.SERVING:
        if deployment.engine.get("state") == "ready":
            return "ready"
        started = Job.objects.filter(deployment=deployment, started__isnull=False).exists()
        return "asleep→loading" if deployment.on_call and not started else "loading"
    return deployment.get_status_display().lower()
