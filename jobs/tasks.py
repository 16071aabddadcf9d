from celery import shared_task
from celery.signals import worker_process_init, worker_ready

from jobs.engine import child, leftovers, loop
from jobs.queue import ending, failover


@worker_process_init.connect
def settle_on_start(**kwargs) -> None:
    """In an engine worker's child, before it takes a job: settle what the last child left behind."""
    if child.deployment_id() is not None:
        leftovers.on_child_start()


@worker_ready.connect
def settle_abandoned_on_start(**kwargs) -> None:
    """When an ordinary worker starts (the panel starts): deployments whose preparing process ended fail,
    then jobs left on deployments that are gone move to another replica or end."""
    if child.deployment_id() is None:
        from models_app.deploying import deploy  # imported here, like recovery below: tasks load in every worker

        deploy.settle_interrupted()
        failover.rescue_abandoned()  # routed jobs waiting on them go to a replica that answers
        ending.settle_abandoned()


@shared_task(acks_late=True, ignore_result=True)
def run_job(job_id: int) -> None:
    """Runs in the deployment's engine worker (queue `engine.<id>`)."""
    loop.run(job_id)


@shared_task(acks_late=True, ignore_result=True)
def confirm_stop(job_id: int, attempt: int) -> None:
    """Runs in an ordinary worker a while after a running job was asked to stop (jobs/queue/ending.py)."""
    ending.stop_unconfirmed(job_id, attempt)


@shared_task(ignore_result=True)
def load_engine(deployment_id: int) -> None:
    """The first message an engine child sends itself: load the model before any job needs it; then take what
    waits on its sibling replicas (jobs/queue/sharing.py), which routed a burst elsewhere while it loaded."""
    child.warm_up(deployment_id)
    loop.run(0)


@shared_task(acks_late=True, ignore_result=True)
def recover_deployment(deployment_id: int, dead: list[str], job_ids: list[int]) -> None:
    """Runs in an ordinary worker: the deployment's own engine is being replaced."""
    from jobs.engine import recovery
    from models_app.models import Deployment

    recovery.recover(Deployment.objects.get(pk=deployment_id), dead, job_ids)


@shared_task(ignore_result=True)
def verify_deployment(deployment_id: int, user_id: int | None = None) -> None:
    from jobs.engine import verify
    from models_app.models import Deployment

    verify.verify(Deployment.objects.get(pk=deployment_id), user_id and _user(user_id))


def _user(user_id: int):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.filter(pk=user_id).first()


@shared_task(acks_late=True, ignore_result=True)
def prepare_on_call(deployment_id: int) -> None:
    """Runs in an ordinary worker: a deployment an on-call model's request woke (jobs/queue/wakeup.py)."""
    from jobs.queue import wakeup

    wakeup.prepare(deployment_id)


@shared_task(ignore_result=True)
def look_after_on_call() -> dict:
    """Sent by celery beat every ONCALL_CHECK_EVERY_S: idle on-call deployments unloaded, waiting ones placed."""
    from jobs.queue import wakeup

    return wakeup.look_after()
