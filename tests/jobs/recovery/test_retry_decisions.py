"""What recovery decides for a job a laptop's death failed, as a listener (the OpenAI API) learns it: a retry
is coming, here is the retry, or no retry and why. No job is left waiting for a retry that will not come."""

import pytest
from django.utils import timezone

from jobs.api.openai_views import cancel_unfinished
from jobs.engine import recovery
from jobs.models import Job, JobKind, JobStatus
from jobs.queue import ending
from models_app.models import DeploymentStatus
from tests.jobs.standins import streamed


@pytest.fixture
def failed(ready, bob) -> Job:
    return Job.objects.create(kind=JobKind.COMPLETION, deployment=ready, user=bob, prompt="hi",
                              params={"max_tokens": 4}, status=JobStatus.FAILED,
                              error="Stopped: test-2 stopped answering during generation (killed).")


def test_a_job_failed_by_a_laptop_waits_for_its_retry_then_points_to_it(failed, settings):
    settings.JOB_RETRIES = 1
    assert recovery.retry_state(failed.pk) == (True, None), "recovery has not decided yet"
    recovery.retry([failed.pk])
    again = Job.objects.get(retry_of=failed)
    assert again.status == JobStatus.QUEUED and again.prompt == "hi"
    assert recovery.retry_state(failed.pk) == (False, again.pk)


def test_an_embedding_jobs_retry_embeds_the_same_inputs(ready, bob, settings):
    settings.JOB_RETRIES = 1
    lost = Job.objects.create(kind=JobKind.EMBEDDING, deployment=ready, user=bob, inputs=["one", [1, 2]],
                              params={"max_tokens": 4}, status=JobStatus.FAILED,
                              error="Stopped: test-2 stopped answering during its decode (killed).")
    recovery.retry([lost.pk])
    again = Job.objects.get(retry_of=lost)
    assert again.is_embedding and again.inputs == ["one", [1, 2]]


def test_no_retry_is_written_down_with_the_reason(failed, settings):
    settings.JOB_RETRIES = 0
    recovery.retry([failed.pk])
    failed.refresh_from_db()
    assert "Not retried. Its retries are used up (JOB_RETRIES=0)." in failed.error
    assert recovery.retry_state(failed.pk) == (False, None)
    assert not Job.objects.filter(retry_of=failed).exists()


def test_a_deployment_gone_while_coming_back_means_no_retry_and_says_so(failed, ready, settings):
    settings.JOB_RETRIES = 1
    ready.set_status(DeploymentStatus.FAILED, "rpc-servers did not come up")
    recovery.retry([failed.pk])
    failed.refresh_from_db()
    assert "Not retried." in failed.error and "not ready" in failed.error
    assert recovery.retry_state(failed.pk) == (False, None)


def test_other_failures_are_not_waited_on(failed):
    failed.error = "Context length exceeded: the prompt has 2000 tokens and the deployment's context is 1024."
    failed.save()
    assert recovery.retry_state(failed.pk) == (False, None)


def test_no_retry_is_awaited_once_the_deployment_stopped(failed, ready):
    """A lab admin stopped it while recovery was under way (or recovery's worker died and it was settled
    failed): whatever recovery wrote or not, nobody waits for a retry."""
    assert recovery.retry_state(failed.pk) == (True, None)
    ready.set_status(DeploymentStatus.STOPPED, "Stopped by alice.")
    assert recovery.retry_state(failed.pk) == (False, None)


def test_jobs_are_told_no_retry_comes_when_recovery_cannot_be_started(transactional_db, ready, bob, monkeypatch):
    job = Job.objects.create(kind=JobKind.COMPLETION, deployment=ready, user=bob, prompt="hi", params={},
                             status=JobStatus.RUNNING, attempts=1)

    def broker_away(*args, **kwargs):
        raise OSError("Connection refused")

    monkeypatch.setattr(recovery.task_messages, "recover_deployment", broker_away)
    with pytest.raises(OSError):
        recovery.laptops_died(ready, {"test-2": "killed"}, [job])
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and "Not retried. Recovery could not be started" in job.error, job.error
    assert recovery.retry_state(job.pk) == (False, None)


def test_a_client_gone_while_its_retry_was_awaited_gets_no_retry(cancels_forgotten, failed, settings):
    """The client hung up while its stream waited for the retry: a retry then would answer nobody."""
    settings.JOB_RETRIES = 1
    failed.attempts, failed.started = 1, timezone.now()
    failed.save()
    told = streamed(failed, "Once", " upon")
    cancel_unfinished(failed.pk, told)
    recovery.retry([failed.pk])
    failed.refresh_from_db()
    assert "Not retried. Its client had asked it to stop." in failed.error
    assert failed.output == told, "its row keeps what its client was told"
    assert not Job.objects.filter(retry_of=failed).exists() and recovery.retry_state(failed.pk) == (False, None)


def test_a_client_gone_once_its_retry_was_queued_cancels_the_retry_keeping_what_it_was_told(cancels_forgotten,
                                                                                             failed, settings):
    settings.JOB_RETRIES = 1
    recovery.retry([failed.pk])
    cancel_unfinished(failed.pk, "One day, a cat")
    again = Job.objects.get(retry_of=failed)
    assert again.status == JobStatus.CANCELLED and again.output == "One day, a cat"


def test_a_job_its_client_stopped_as_its_laptop_died_ends_cancelled_not_retried(cancels_forgotten, ready, bob,
                                                                                transactional_db):
    job = Job.objects.create(kind=JobKind.COMPLETION, deployment=ready, user=bob, prompt="hi", params={},
                             status=JobStatus.RUNNING, attempts=1, started=timezone.now())
    told = streamed(job, "One", " day")
    ending.cancel(job, told)  # asked to stop; the engine had not yet when the laptop died
    recovery.fail_interrupted({"test-2": "killed"}, [Job.objects.get(pk=job.pk)])
    job.refresh_from_db()
    assert job.status == JobStatus.CANCELLED and job.output == told and "Stopped as asked" in job.error
    assert recovery.retry_state(job.pk) == (False, None)
