"""A job whose queue message was lost (Redis restarted before saving it) still runs: behind a running job the
engine goes on to it by itself, and an idle engine is sent a new message by the supervisor."""


from jobs.engine.workers import STALLED_S
from jobs.models import Job, JobKind, JobStatus
from jobs.queue import queueing
from tests.conftest import wait_until
from tests.jobs.cluster import GREEDY


def unsent(deployment, user, text: str, tokens: int) -> Job:
    """A queued job whose message never reached the engine's queue."""
    return Job.objects.create(kind=JobKind.CHAT, deployment=deployment, user=user, params={**GREEDY,
                              "max_tokens": tokens}, messages=[{"role": "user", "content": text}])


def test_jobs_whose_messages_were_lost_still_run(cluster, bob):
    running = queueing.submit(Job(kind=JobKind.CHAT, deployment=cluster, user=bob, params={**GREEDY,
                              "max_tokens": 200}, messages=[{"role": "user", "content": "Tell me a long story."}]))
    wait_until(lambda: Job.objects.get(pk=running.pk).status == JobStatus.RUNNING, 60, "the first job to start")
    behind = unsent(cluster, bob, "Say hello.", 8)
    wait_until(lambda: Job.objects.get(pk=behind.pk).is_finished, 120, "the job behind it to run")
    assert Job.objects.get(pk=behind.pk).status == JobStatus.SUCCEEDED

    idle = unsent(cluster, bob, "Say goodbye.", 8)  # nothing runs now: only the supervisor can notice
    wait_until(lambda: Job.objects.get(pk=idle.pk).is_finished, 3 * STALLED_S + 60, "the stranded job to run")
    assert Job.objects.get(pk=idle.pk).status == JobStatus.SUCCEEDED
