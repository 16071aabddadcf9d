"""What an engine worker's child does when it starts, before it takes a job: settle what its predecessor left.

A job still RUNNING was interrupted — by a laptop whose rpc-server died (then the job fails naming it and is
retried: this child reloads the same plan when every such server is running again, else the deployment is
re-planned, jobs/engine/recovery.py), or by the engine itself (then the job runs again; its result was never
stored). Jobs routed by model go to another replica of the model, if one answers, rather than wait for this
one's reload or recovery (jobs/engine/recovery.py `hand_off`, jobs/queue/failover.py). Then every queued job's
message is sent again, since some may have died with the predecessor.
"""

from django.db import close_old_connections

from jobs import task_messages
from jobs.engine import child, recovery
from jobs.models import Job, JobStatus
from jobs.queue import ending, failover, queueing
from models_app.models import Deployment


def on_child_start() -> None:
    """Settle interrupted jobs, then re-send every queued job's message (some may have died with us)."""
    close_old_connections()
    deployment = Deployment.objects.filter(pk=child.deployment_id()).first()
    if deployment is None:
        return
    interrupted = list(Job.objects.filter(deployment=deployment, status=JobStatus.RUNNING))
    if interrupted:
        child.set_engine(deployment, state="restarting")  # routing sends no new job here until it has loaded
        dead = recovery.dead_laptops(deployment)
        if dead:
            interrupted = recovery.hand_off(deployment, dead, interrupted)
        if dead and not recovery.all_back(deployment, dead, interrupted):
            child.State.retired = True
            recovery.laptops_died(deployment, dead, interrupted)
            return
        if not dead:
            run_again(interrupted)
            failover.move_waiting(deployment, "its engine stopped and reloads the model")
    task_messages.load_engine(deployment.pk, deployment.queue)  # loading shows before the first job
    queueing.wake_all(deployment)


def run_again(interrupted: list[Job]) -> None:
    """Jobs the engine itself stopped under (no laptop to blame) run again, up to MAX_ENGINE_STOPS times."""
    for job in interrupted:
        if job.attempts >= child.MAX_ENGINE_STOPS:
            child.finish(job, JobStatus.FAILED, error="The engine stopped twice while running this job; "
                                                       "see the engine worker's log.")
        else:
            ending.requeue(job)
