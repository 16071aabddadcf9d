"""Replicas share their waiting people: an engine with a free slot and nothing of its own waiting takes the next
routed job that waits on a sibling replica with no free slot for it.

The router (jobs/queue/routing.py) sends each request to the replica that will answer it soonest as things stand
when it arrives; things change right after. A replica whose engine was still loading took none of a burst and
then sat idle while its sibling worked through the queue (8:0 in a trial); answers that end early free slots on
one replica while people wait on the other. So the engine takes jobs as its slots free up, its own first, then
its siblings' (`take`), and an engine that has just loaded looks for them before any job of its own arrives.
A job moves as failover moves one (jobs/queue/failover.py `move`): a guarded update of a job still waiting where
it was, written in its `params["routing"]["moves"]`, told to its listeners; it keeps its id, so its stream goes
on. Only people's jobs routed by model move: a job sent to one deployment stays, a batch item waits in its
batch's own queue (jobs/queue/queueing.py), and nothing moves from a sibling whose own free slots are about to
take it.
"""

from django.db.models import Count, Q

from jobs.models import Job, JobStatus
from jobs.queue import failover, queueing, routing
from models_app.models import Deployment

WHY = "a slot came free on another replica first"
LOOKED_AT = 8  # a sibling's first waiting jobs looked at: a conversation's job may stay (it was routed there)


def take(deployment: Deployment) -> Job | None:
    """A job waiting on a sibling replica, moved here and claimed (RUNNING and ours); None if none waits."""
    model = deployment.model.name
    siblings = [other for other in routing.replicas(model) if other.pk != deployment.pk]
    for sibling in sorted(siblings, key=lambda other: -waiting_beyond_free(other)):
        if waiting_beyond_free(sibling) <= 0:
            break
        for job in queueing.in_turn(sibling.pk)[:LOOKED_AT]:
            if routing.routed_model(job) == model and failover.move(job, sibling, deployment, WHY):
                claimed = queueing.claim(job.pk, deployment.pk)
                if claimed is not None:
                    queueing.announce_positions(sibling.pk)
                    return claimed
    return None


def waiting_beyond_free(deployment: Deployment) -> int:
    """People's jobs waiting on it that its own free slots will not take at once."""
    slots = deployment.slots
    engine = deployment.engine or {}
    if engine.get("state") == "ready" and isinstance(engine.get("slots"), int):
        slots = engine["slots"]
    counts = Job.objects.filter(deployment=deployment.pk).aggregate(
        waiting=Count("pk", filter=Q(status=JobStatus.QUEUED, batch__isnull=True)),
        running=Count("pk", filter=Q(status=JobStatus.RUNNING)))
    return counts["waiting"] - max(slots - counts["running"], 0)
