"""The one door from the job modules to Celery: every message names its task, so the modules a task runs
never import jobs/tasks.py back (tasks → engine_child → runner → recovery → queueing runs one way).

tests/jobs/test_task_messages.py holds each name and argument list to a registered task.
"""

import logging

import redis
from django.conf import settings

from clusterpanel.celery import app
from jobs.stream import new_work_channel

log = logging.getLogger(__name__)

RUN_JOB = "jobs.tasks.run_job"
CONFIRM_STOP = "jobs.tasks.confirm_stop"
LOAD_ENGINE = "jobs.tasks.load_engine"
RECOVER_DEPLOYMENT = "jobs.tasks.recover_deployment"


def send(task: str, args: tuple, **options) -> None:
    # Every task here ignores its result, but only the task object knows that: without it the sender would
    # also subscribe to a result in Redis, and wait out the backend's retries when Redis is down.
    app.send_task(task, args, ignore_result=True, **options)


def run_job(job_id: int, queue: str) -> None:
    send(RUN_JOB, (job_id,), queue=queue)
    announce(queue, job_id)


class _Announcer:
    client: redis.Redis | None = None


def announce(queue: str, job_id: int) -> None:
    """Tell a running engine at once that a job came: it takes new jobs between decode steps. Lost, the engine
    still finds the job within a second (it looks in the database that often)."""
    try:
        _Announcer.client = _Announcer.client or redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2)
        _Announcer.client.publish(new_work_channel(queue), job_id)
    except (redis.RedisError, OSError) as exc:
        log.warning("could not announce job %s to its engine: %s", job_id, exc)


def confirm_stop(job_id: int, attempt: int, countdown: float) -> None:
    send(CONFIRM_STOP, (job_id, attempt), countdown=countdown)


def load_engine(deployment_id: int, queue: str) -> None:
    send(LOAD_ENGINE, (deployment_id,), queue=queue)


def recover_deployment(deployment_id: int, dead: list[str], job_ids: list[int]) -> None:
    send(RECOVER_DEPLOYMENT, (deployment_id, dead, job_ids))
