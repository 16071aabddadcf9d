"""The one door to the job tasks in Celery: every message names its task, so the modules a task runs never
import jobs/tasks.py back (tasks → engine → queue runs one way), and neither do the pages.

tests/jobs/queue/test_task_messages.py holds each name and argument list to a registered task.
"""

from clusterpanel.kit.celery import app
from jobs.queue import stream

RUN_JOB = "jobs.tasks.run_job"
CONFIRM_STOP = "jobs.tasks.confirm_stop"
LOAD_ENGINE = "jobs.tasks.load_engine"
RECOVER_DEPLOYMENT = "jobs.tasks.recover_deployment"
VERIFY_DEPLOYMENT = "jobs.tasks.verify_deployment"
PREPARE_ON_CALL = "jobs.tasks.prepare_on_call"


def send(task: str, args: tuple, **options) -> None:
    # Every task here ignores its result, but only the task object knows that: without it the sender would
    # also subscribe to a result in Redis, and wait out the backend's retries when Redis is down.
    app.send_task(task, args, ignore_result=True, **options)


def run_job(job_id: int, queue: str) -> None:
    send(RUN_JOB, (job_id,), queue=queue)
    stream.announce_new_job(queue, job_id)


def confirm_stop(job_id: int, attempt: int, countdown: float) -> None:
    send(CONFIRM_STOP, (job_id, attempt), countdown=countdown)


def load_engine(deployment_id: int, queue: str) -> None:
    send(LOAD_ENGINE, (deployment_id,), queue=queue)


def recover_deployment(deployment_id: int, dead: list[str], job_ids: list[int], countdown: float = 0) -> None:
    send(RECOVER_DEPLOYMENT, (deployment_id, dead, job_ids), countdown=countdown)


def verify_deployment(deployment_id: int, user_id: int | None) -> None:
    send(VERIFY_DEPLOYMENT, (deployment_id, user_id))


def prepare_on_call(deployment_id: int) -> None:
    send(PREPARE_ON_CALL, (deployment_id,))
