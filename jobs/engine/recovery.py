"""When a laptop dies under a running job: name it, re-plan on the laptops left, reload, retry the job.

Blame comes from the laptops themselves, over SSH: a laptop whose rpc-server is
gone, or is not the process the engine loaded onto (the supervisor restarts dead
servers within seconds, so "running again" is not "never died"), or that does
not answer at all.

Recovery, though, keeps every laptop whose rpc-server is running again by the
time it plans (jobs/engine/comeback.py): the jobs name the laptop that failed
them, but leaving out a laptop that serves again would move its layers onto the
others for nothing. When every laptop is back, the plan stays as it was.
"""

import logging
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from clusterpanel.kit.broadcast import broadcast
from jobs import task_messages
from jobs.engine import child, comeback
from jobs.models import NOT_RETRIED, STOPPED, Job, JobStatus, awaiting_retry
from jobs.queue import ending, failover, queueing, routing, stream
from models_app.deploying import deploy
from models_app.models import Deployment, DeploymentStatus
from models_app.planning.records import PlanningError, as_record, make_plan
from nodes.models import RpcServer
from nodes.remote import ssh
from nodes.servers import rpcserver

log = logging.getLogger(__name__)
NO_ANSWER = "it does not answer over SSH"
ASK_AT_ONCE = 16  # laptops asked at once whether their rpc-server still runs
SUPERVISOR_SAW_S = 60.0  # a death the supervisor recorded this recently is the one under the failed jobs


def dead_laptops(deployment: Deployment) -> dict[str, str]:
    """Laptop name → what happened to it, for each laptop whose rpc-server is not the one the engine used.
    The laptops are asked all at once: one at a time, each laptop's SSH round trip kept the failed jobs waiting."""
    loaded = deployment.engine.get("servers", {})
    stages = [stage for stage in deployment.stages.select_related("node", "server") if stage.server]
    with ThreadPoolExecutor(max_workers=ASK_AT_ONCE) as pool:
        states = list(pool.map(server_state, stages))
    dead = {}
    for stage, state in zip(stages, states, strict=True):
        server, node = stage.server, stage.node
        if isinstance(state, ssh.SSHError):
            dead[node.name] = f"{NO_ANSWER} ({state})"
            continue
        server.refresh_from_db()
        if not state.running:
            dead[node.name] = f"its rpc-server ended: {ended_how(server, state)}"
        elif loaded.get(node.name) and state.pid != loaded[node.name]:
            reason = (server.last_death or "").split("\n", 1)[0] or "it is no longer the one the engine used"
            dead[node.name] = f"its rpc-server ended: {reason} (the panel has started a new one since)"
    return dead


def ended_how(server: RpcServer, state: rpcserver.ServerState) -> str:
    """A stopped server's last words; or, where its log has none, what the supervisor read of them a moment ago:
    restarting the server, it moved the old log aside, and the new one is no server's yet (a loaded run: the job
    said "no exit status recorded" of an rpc-server the supervisor had just found killed by signal 9)."""
    if rpcserver.EXITED not in state.log_tail and server.last_death and server.last_death_at and \
            (timezone.now() - server.last_death_at).total_seconds() < SUPERVISOR_SAW_S:
        return server.last_death.split("\n", 1)[0]
    return rpcserver.why_it_ended(state.log_tail)


def server_state(stage) -> rpcserver.ServerState | ssh.SSHError:
    """The stage's rpc-server as its laptop sees it, or why the laptop did not say (in a thread of its own: no
    database here)."""
    try:
        return rpcserver.state(stage.node.ssh_target(), stage.node.install_dir, stage.server.port,
                               last_words_s=rpcserver.LAST_WORDS_S)
    except ssh.SSHError as exc:
        return exc


def fail_interrupted(dead: dict[str, str], interrupted: list[Job]) -> str:
    """The interrupted jobs failed naming the laptops; what happened to those, in words."""
    what = "; ".join(f"{name}: {why}" for name, why in dead.items())
    for job in interrupted:
        if ending.cancel_asked(job.pk):  # its client had left: no retry to answer nobody with other words
            ending.end_stopped(job.pk, job.attempts, f"Stopped as asked, as {', '.join(dead)} stopped "
                                                       f"answering ({what}).")
            continue
        child.finish(job, JobStatus.FAILED, error=f"{STOPPED} {', '.join(dead)} stopped answering during "
                                                   f"generation ({what}).")
    return what


def hand_off(deployment: Deployment, dead: dict[str, str], interrupted: list[Job]) -> list[Job]:
    """Where the model has another replica, the interrupted jobs routed by model fail naming the laptops and are
    retried there at once, rather than after this deployment's recovery, and its routed waiting jobs move there
    (jobs/queue/failover.py). The interrupted jobs left (sent to this deployment, or with no other replica to go
    to), for recovery as before."""
    elsewhere = [job for job in interrupted if other_replica(job) is not None]
    if elsewhere:
        fail_interrupted(dead, elsewhere)
        retry([job.pk for job in elsewhere])
    failover.move_waiting(deployment, f"{', '.join(dead)} stopped answering")
    return [job for job in interrupted if job not in elsewhere]


def other_replica(job: Job) -> Deployment | None:
    """The replica a routed job would be retried on, its own left out; None for a job sent to one deployment."""
    model = routing.routed_model(job)
    return routing.pick(model, job.params.get("max_tokens"), leaving=job.deployment_id) if model else None


def all_back(deployment: Deployment, dead: dict[str, str], interrupted: list[Job]) -> bool:
    """When every dead laptop's rpc-server is running again (or is within comeback.BACK_WITHIN_S), nothing needs
    planning: the jobs fail naming the laptops and are retried at once, and the engine worker whose child died
    reloads the same plan in its next child (True). No new revision, so no new engine worker to start (seconds
    of Python imports on a busy head) and none to stop first."""
    if any(why.startswith(NO_ANSWER) for why in dead.values()):  # not back: asking again waits out SSH's timeout
        return False
    stages = list(deployment.stages.select_related("node", "server"))
    back = comeback.back_again(deployment, stages, list(dead))
    if sorted(back) != sorted(dead):
        return False
    what = fail_interrupted(dead, interrupted)
    deployment.plan = comeback.remember(deployment, deployment.plan, back)
    deployment.save(update_fields=["plan"])
    kept = comeback.in_words(deployment, back, [])
    deployment.set_status(DeploymentStatus.READY, f"{', '.join(dead)} failed ({what}){kept}; the engine reloads "
                                                  "the model.")
    retry([job.pk for job in interrupted])
    return True


def laptops_died(deployment: Deployment, dead: dict[str, str], interrupted: list[Job]) -> None:
    """Fail the interrupted jobs naming the laptops, mark the deployment degraded, start the re-plan."""
    what = fail_interrupted(dead, interrupted)
    # The supervisor stops this engine (and this process) as soon as it sees the deployment degraded: the
    # status commits only once the recovery task is sent, or a quick supervisor left it never sent.
    try:
        with transaction.atomic():
            deployment.set_status(DeploymentStatus.DEGRADED,
                                  f"{', '.join(dead)} failed ({what}). Re-planning; a laptop whose rpc-server "
                                  "runs again by then keeps its place.")
            task_messages.recover_deployment(deployment.pk, list(dead), [job.pk for job in interrupted])
    except Exception as exc:  # no recovery comes: the jobs must not wait for a retry for ever
        not_retried(undecided([job.pk for job in interrupted]), f"Recovery could not be started ({exc}).")
        raise
    failover.move_waiting(deployment, f"{', '.join(dead)} failed; its deployment is being re-planned")


def recover(deployment: Deployment, dead: list[str], job_ids: list[int]) -> None:
    """Re-plan without the dead laptops; if the model still fits, bring it back and retry each job once.
    Whatever goes wrong, the deployment ends up ready or failed, and each job is retried or told why not."""
    try:
        back = bring_back(deployment, dead, job_ids)
    except Exception as exc:  # anything unexpected: it must not stay preparing, nor its jobs wait for a retry
        log.exception("recovering %s failed", deployment)
        give_up(deployment, job_ids, f"Recovery failed unexpectedly: {exc}")
        return
    if back:
        retry(job_ids)


def bring_back(deployment: Deployment, dead: list[str], job_ids: list[int]) -> bool:
    """The deployment ready again on its laptops but those still dead (True), or failed saying why (False)."""
    stages = list(deployment.stages.select_related("node", "server"))
    back = comeback.back_again(deployment, stages, dead)
    gone = [name for name in dead if name not in back]
    words = comeback.in_words(deployment, back, gone)
    laptops = re_plan(deployment, stages, gone, back, words, job_ids) if gone else same_plan(deployment, back, words)
    if laptops is None:
        return False
    try:
        stages = list(deployment.stages.select_related("node"))
        deploy.wait_for_servers(stages)
        if gone and deployment.preseed:
            deploy.fill_caches(deployment, stages)  # the laptops left now hold more layers
    except deploy.DeployError as exc:
        give_up(deployment, job_ids, str(exc))
        return False
    deployment.set_status(DeploymentStatus.READY, f"Running on {', '.join(laptops)} after {', '.join(dead)} "
                                                  f"failed{words}; the engine reloads the model.")
    return True


def same_plan(deployment: Deployment, back: list[str], words: str) -> list[str]:
    """Every laptop is back: the plan stays as it was (no layer moves, each laptop's cache still holds its
    layers), and a new engine loads it. Its laptops' names, in pipeline order."""
    with transaction.atomic():
        deployment.plan = comeback.remember(deployment, deployment.plan, back)
        deployment.revision += 1
        deployment.engine = {}
        deployment.save(update_fields=["plan", "revision", "engine"])
    laptops = [stage.node.name for stage in deployment.stages.select_related("node").order_by("position")]
    deploy.prepare_again(deployment, f"Keeping its plan on {', '.join(laptops)}{words}; waiting for their "
                                     "rpc-servers.")
    return laptops


def re_plan(deployment: Deployment, stages, gone: list[str], back: list[str], words: str,
            job_ids: list[int]) -> list[str] | None:
    """A new plan on the laptops but those `gone`: its laptops' names in pipeline order, or None when the model
    no longer fits (the deployment failed saying so)."""
    remaining = [stage.node for stage in stages if stage.node.name not in gone]
    try:
        if not remaining:
            raise PlanningError("no laptop is left.")
        plan = make_plan(deployment.model, remaining, deployment.ctx, deployment.mode, replacing=deployment,
                         slots=deployment.slots)
    except PlanningError as exc:
        # Failed, not degraded: it can take no job now, and its laptops' memory is better given back.
        give_up(deployment, job_ids, f"It no longer fits without {', '.join(gone)}: {exc}", keep_detail=True)
        return None
    with transaction.atomic():
        for stage in stages:
            if stage.node.name in gone and stage.server:
                RpcServer.objects.filter(pk=stage.server_id).update(wanted=False)
        kept = {stage.node.name: stage.server for stage in stages if stage.node.name not in gone}
        deployment.stages.all().delete()
        deployment.plan = comeback.remember(deployment, as_record(plan), back)
        deployment.revision += 1
        deployment.engine = {}
        deployment.save(update_fields=["plan", "revision", "engine"])
        laptops = deploy.record_stages(deployment, plan, remaining, servers=kept)
    for name, server in kept.items():
        if name not in laptops:
            RpcServer.objects.filter(pk=server.pk).update(wanted=False)
    deploy.prepare_again(deployment, f"Re-planned on {', '.join(laptops)} without {', '.join(gone)}{words}; "
                                     "waiting for their rpc-servers.")
    return laptops


def give_up(deployment: Deployment, job_ids: list[int], why: str, keep_detail: bool = False) -> None:
    """The deployment FAILED with `why` (after what it said, with `keep_detail`), its servers let go; the jobs
    recovery was to retry, and those waiting on it, fail saying why."""
    detail = f"{deployment.status_detail} {why}".strip() if keep_detail else why
    waiting = undecided(job_ids)  # before it fails: then none counts as waiting any more, told why or not
    deploy.stop(deployment, DeploymentStatus.FAILED, detail)
    not_retried(waiting, why)
    fail_waiting(deployment, f"The deployment stopped: {why}")


def undecided(job_ids: list[int]) -> list[Job]:
    """Those of the jobs still waiting to hear whether a retry comes."""
    return [job for job in Job.objects.filter(pk__in=job_ids) if retry_state(job.pk)[0]]


def fail_waiting(deployment: Deployment, why: str) -> None:
    """Jobs still queued on a deployment that will not come back: those routed by model move to another replica
    if one answers; the others fail."""
    failover.move_waiting(deployment, why)
    for job in Job.objects.filter(deployment=deployment, status=JobStatus.QUEUED):
        if Job.objects.filter(pk=job.pk, status=JobStatus.QUEUED).update(status=JobStatus.FAILED, error=why,
                                                                         finished=timezone.now()):
            job.refresh_from_db()
            stream.announce_done(job)


def retry(job_ids: list[int]) -> None:
    """A new job for each failed one (none yet retried), as long as it has retries left (JOB_RETRIES, 1 by
    default); one routed by model on another replica when one answers (`other_replica`), the move written down."""
    allowed = int(getattr(settings, "JOB_RETRIES", 1))
    for job in Job.objects.filter(pk__in=job_ids, status=JobStatus.FAILED, retry__isnull=True):
        depth, earlier = 0, job
        while earlier.retry_of_id:
            depth, earlier = depth + 1, earlier.retry_of
        if ending.cancel_asked(job.pk):  # its client left while it waited for this: its row keeps what it heard
            job.output = job.output or stream.told(job.pk) or ""
            job.save(update_fields=["output"])
            not_retried([job], "Its client had asked it to stop.")
            continue
        if depth >= allowed or (job.batch_id and job.batch.cancelled):
            not_retried([job], f"Its retries are used up (JOB_RETRIES={allowed})." if depth >= allowed
                        else "Its batch was cancelled.")
            continue
        deployment, params = job.deployment, job.params
        other = other_replica(job)
        if other is not None:
            deployment = other
            params = routing.with_move(params, job.deployment_id, other.pk, "retried on another replica")
        again = Job(kind=job.kind, deployment=deployment, user=job.user, api_token_id=job.api_token_id,
                    messages=job.messages, prompt=job.prompt, inputs=job.inputs, params=params, retry_of=job,
                    conversation=job.conversation, batch=job.batch, line=job.line, custom_id=job.custom_id)
        try:
            queueing.submit(again)
        except queueing.QueueError as exc:  # the deployment went away while it was being brought back
            not_retried([job], str(exc))
            continue
        except queueing.QueueDown as exc:  # Redis did not take its message: the retry has failed already
            not_retried([job], f"Its retry could not be queued: Redis, which carries jobs, did not answer ({exc}).")
            continue
        broadcast(stream.group(job.pk), "job.event", {"event": "retry", "job": again.pk})


def not_retried(jobs, why: str) -> None:
    """Write down that a job failed by a laptop's death gets no retry, and tell its listeners again."""
    for job in jobs:
        job.error = f"{job.error} {NOT_RETRIED} {why}"
        job.save(update_fields=["error"])
        stream.announce_done(job)
        if job.batch_id:  # the line is decided: the batch page's counts move
            broadcast(f"batch_{job.batch_id}", "batch.progress", {"job": job.pk, "status": job.status})


def retry_state(job_id: int) -> tuple[bool, int | None]:
    """For a failed job: whether a retry may still come, and the retry once it is there. A job failed by
    a laptop's death waits until recovery either submits its retry or writes down why not."""
    again = Job.objects.filter(retry_of_id=job_id).values_list("pk", flat=True).first()
    if again is not None:
        return False, again
    return Job.objects.filter(awaiting_retry(), pk=job_id).exists(), None
