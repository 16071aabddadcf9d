"""A client that hangs up while its job's retry has not yet said what the client was sent (the engine's worker died
under the first attempt): the job ends with the text its client has, not the retry's shorter one, and the retry is
told to stop. Found by the chaos soak: a hung-up stream told 5 tokens whose job kept ''."""

import pytest
from django.utils import timezone

from jobs.api.openai_views import cancel_unfinished
from jobs.models import Job, JobKind, JobStatus
from jobs.queue import ending, stream


@pytest.fixture
def retried(ready, bob) -> Job:
    """A job whose first attempt streamed "Hello wor" and whose second has begun and said nothing yet."""
    job = Job.objects.create(kind=JobKind.CHAT, deployment=ready, user=bob, status=JobStatus.RUNNING, attempts=2,
                             started=timezone.now(), messages=[{"role": "user", "content": "Say hello."}])
    out = stream.JobStream()
    out.start(job.pk, 1)
    out.token(job.pk, "Hello ")
    out.token(job.pk, "wor")
    assert out.flush()
    out.start(job.pk, 2)
    out.event(job.pk, "status", {"status": JobStatus.RUNNING})
    assert out.flush()
    return job


def test_the_row_keeps_what_the_client_has_when_the_retry_is_behind(retried, transactional_db):
    assert stream.told(retried.pk) == "", "the retry has said nothing yet"
    cancel_unfinished(retried.pk, "Hello wor")
    job = Job.objects.get(pk=retried.pk)
    assert job.status == JobStatus.CANCELLED and job.output == "Hello wor", (job.status, job.output)
    assert stream.store().exists(ending.cancel_key(job.pk)), "the retry is told to stop"


def test_a_client_the_attempt_has_caught_up_with_leaves_the_end_to_the_engine(retried, transactional_db):
    out = stream.JobStream()
    out.start(retried.pk, 2)
    out.token(retried.pk, "Hello world")
    assert out.flush()
    cancel_unfinished(retried.pk, "Hello wor")
    job = Job.objects.get(pk=retried.pk)
    assert job.status == JobStatus.RUNNING, "the engine stops it within a token and writes what it made"
    assert stream.store().exists(ending.cancel_key(job.pk)), "asked to stop"
