"""A job whose queue message was lost (Redis restarted before saving it) still runs: behind a running job the
engine goes on to it by itself, and an idle engine is sent a new message by the supervisor.

The supervisor looks for stalled jobs every ENGINE_STALLED_S, 2 s here rather than 30 s; the stranded job is
saved only once the engine's loop has ended (its engine log says the task that ran the first two succeeded),
so that nothing but the supervisor can notice it."""

import re
from pathlib import Path

import pytest
from django.conf import settings

from jobs.models import Job, JobKind, JobStatus
from jobs.queue import queueing
from tests.conftest import wait_until
from tests.jobs.cluster import GREEDY

STALLED_S = 2


@pytest.fixture(autouse=True)
def stalled_soon(monkeypatch) -> None:
    """The supervisor the `cluster` fixture starts (after this one) sends a stalled job's message after 2 s."""
    monkeypatch.setenv("ENGINE_STALLED_S", str(STALLED_S))


def unsent(deployment, user, text: str, tokens: int) -> Job:
    """A queued job whose message never reached the engine's queue."""
    return Job.objects.create(kind=JobKind.CHAT, deployment=deployment, user=user, params={**GREEDY,
                              "max_tokens": tokens}, messages=[{"role": "user", "content": text}])


def engine_log(deployment) -> Path:
    return Path(settings.DATA_DIR) / "logs" / f"engine-{deployment.pk}.log"


def engine_idle(deployment, since: int) -> bool:
    """Every job message the engine worker took (its log from offset `since` on) has been run to its end: its
    loop has returned."""
    with engine_log(deployment).open("rb") as log:
        log.seek(since)
        said = log.read().decode(errors="replace")
    taken = set(re.findall(r"Task jobs\.tasks\.run_job\[([\w-]+)\] received", said))
    ended = set(re.findall(r"Task jobs\.tasks\.run_job\[([\w-]+)\] succeeded", said))
    return bool(taken) and taken <= ended


def test_jobs_whose_messages_were_lost_still_run(cluster, bob):
    since = engine_log(cluster).stat().st_size
    running = queueing.submit(Job(kind=JobKind.CHAT, deployment=cluster, user=bob, params={**GREEDY,
                              "max_tokens": 200}, messages=[{"role": "user", "content": "Tell me a long story."}]))
    wait_until(lambda: Job.objects.get(pk=running.pk).status == JobStatus.RUNNING, 60, "the first job to start")
    behind = unsent(cluster, bob, "Say hello.", 8)
    wait_until(lambda: Job.objects.get(pk=behind.pk).is_finished, 120, "the job behind it to run")
    assert Job.objects.get(pk=behind.pk).status == JobStatus.SUCCEEDED

    wait_until(lambda: engine_idle(cluster, since), 60, "the engine's loop to end")
    idle = unsent(cluster, bob, "Say goodbye.", 8)  # nothing runs now: only the supervisor can notice
    # Generous: a supervisor that missed the setting (30 s, then up to 30 s more to its next look) still passes.
    wait_until(lambda: Job.objects.get(pk=idle.pk).is_finished, 3 * 30 + 60, "the stranded job to run")
    assert Job.objects.get(pk=idle.pk).status == JobStatus.SUCCEEDED
