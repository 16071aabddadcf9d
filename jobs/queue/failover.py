"""A replica that fails hands its waiting jobs to the others.

When a deployment's engine stops under its jobs (a laptop died, the engine itself died), or the deployment goes
degraded, fails or stops, each of its QUEUED jobs that was routed by model (jobs/queue/routing.py) moves to the
ready replica of that model that will answer it soonest (not a degraded one: it is being recovered too). The job
keeps its id, so whoever listens to it (an SSE response, the chat page's socket) goes on listening: its events
travel on the job's own channel, whatever deployment runs it (jobs/queue/stream.py). The move is a guarded update
(the job still QUEUED on the failing deployment), written in the job's `params["routing"]["moves"]` and told to its
listeners as a "moved" event. Jobs sent to one deployment by their caller stay, and so do routed jobs with no other
replica to go to: they wait for recovery as before, or fail with their deployment.
"""

import logging

from clusterpanel.kit.broadcast import broadcast
from jobs.models import Job, JobStatus
from jobs.queue import queueing, routing, stream
from models_app.models import Deployment

log = logging.getLogger(__name__)


def move_waiting(deployment: Deployment, why: str) -> list[int]:
    """Move the deployment's routed waiting jobs to other replicas; the ids of those moved, in queue order."""
    moved, targets = [], set()
    for job in queueing.waiting(deployment.pk):
        model = routing.routed_model(job)
        target = model and routing.pick(model, job.params.get("max_tokens"), leaving=deployment.pk)
        if target and move(job, deployment, target, why):
            moved.append(job.pk)
            targets.add(target.pk)
    if moved:
        log.info("%s: moved %d waiting jobs to %s (%s)", deployment, len(moved), sorted(targets), why)
        for target in sorted(targets):
            queueing.announce_positions(target)
        queueing.announce_positions(deployment.pk)
    return moved


def move(job: Job, source: Deployment, target: Deployment, why: str) -> bool:
    """One waiting job to `target`, if it still waits on `source`; its target's engine woken."""
    params = routing.with_move(job.params, source.pk, target.pk, why)
    if not Job.objects.filter(pk=job.pk, status=JobStatus.QUEUED, deployment=source).update(deployment=target,
                                                                                            params=params):
        return False  # claimed, cancelled or moved meanwhile
    job.deployment, job.params = target, params
    broadcast(stream.group(job.pk), "job.event", {"event": "moved", "from": source.pk, "to": target.pk,
                                                  "why": why})
    try:
        queueing.hand_over(job)
    except queueing.QueueDown as exc:  # it failed saying why (Redis is down); the others still move
        log.warning("job %s moved to %s but could not be queued there: %s", job.pk, target, exc)
    return True


def rescue_abandoned() -> int:
    """Routed jobs still waiting on deployments that stopped or failed (the panel was down when they did) move to
    a replica that answers; how many. What is left is settled by ending.settle_abandoned."""
    gone = (Deployment.objects.filter(status__in=queueing.GONE, jobs__status=JobStatus.QUEUED).distinct())
    return sum(len(move_waiting(deployment, f"its deployment {deployment.get_status_display().lower()}"))
               for deployment in gone)
