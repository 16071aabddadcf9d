"""A deployment that recovery prepares again (a laptop died under it: jobs/engine/recovery.py re-plans it and raises
its revision) takes jobs that wait for it, as it did while degraded, by its id and by its model's name, and stays
in /v1/models: the chaos soak (bench/chaos.py) saw a script on /api/jobs/ refused 409 "is preparing, not ready"
for the seconds between degraded and ready again. A first prepare still takes none, and a recovery that fails
fails the jobs that waited, saying why. Rows only: what a worker would be sent is caught."""

import pytest
from django.test import Client

from jobs import task_messages
from jobs.api import inputs
from jobs.engine import recovery
from jobs.models import Job, JobKind, JobStatus
from jobs.queue import queueing
from models_app.models import Deployment, DeploymentStatus
from tests.jobs.conftest import bearer


def recovering(deployment: Deployment, status=DeploymentStatus.PREPARING) -> Deployment:
    """As recovery leaves it between degraded and ready: a new revision, no engine yet."""
    deployment.revision, deployment.engine = deployment.revision + 1, {}
    deployment.save(update_fields=["revision", "engine"])
    deployment.set_status(status, "Re-planned on lab-1 without lab-2; waiting for their rpc-servers.")
    return deployment


@pytest.mark.parametrize("status", [DeploymentStatus.PREPARING, DeploymentStatus.LOADING])
def test_a_recovering_deployment_takes_a_job_by_its_id_and_it_waits(ready, bob, sent, status,
                                                                    django_capture_on_commit_callbacks):
    recovering(ready, status)
    with django_capture_on_commit_callbacks(execute=True):
        answer = Client().post("/api/jobs/", {"kind": "completion", "prompt": "The three primary colours are",
                                              "deployment": ready.pk}, content_type="application/json",
                               **bearer(bob))
    assert answer.status_code == 201, answer.content
    job = Job.objects.get(pk=answer.json()["id"])
    assert job.status == JobStatus.QUEUED and job.deployment == ready
    assert (task_messages.RUN_JOB, (job.pk,)) in sent, "its message waits in the engine's queue for the new engine"


def test_a_request_naming_its_model_still_finds_it(ready, bob, sent):
    recovering(ready)
    assert list(queueing.usable_deployments()) == [ready]
    models = Client().get("/v1/models", **bearer(bob)).json()["data"]
    assert "tiny" in [row["id"] for row in models], "a client listing models would see it vanish for seconds"
    target = inputs.target_for("tiny")  # what /v1 and /api/jobs/ route a model's name by
    assert target.deployment == ready
    job = queueing.submit(Job(kind=JobKind.CHAT, deployment=target.deployment, user=bob,
                              messages=[{"role": "user", "content": "hi"}]))
    assert job.status == JobStatus.QUEUED


def test_a_first_prepare_takes_no_job(ready, bob):
    ready.set_status(DeploymentStatus.PREPARING, "Installing the runtime and starting rpc-servers.")
    answer = Client().post("/api/jobs/", {"kind": "completion", "prompt": "hi", "deployment": ready.pk},
                           content_type="application/json", **bearer(bob))
    assert answer.status_code == 409 and "is preparing, not ready" in answer.json()["error"], answer.content
    assert not Job.objects.exists() and not list(queueing.usable_deployments())


def test_a_recovery_that_fails_fails_the_jobs_that_waited_saying_why(ready, bob, sent):
    recovering(ready)
    job = queueing.submit(Job(kind=JobKind.COMPLETION, deployment=ready, user=bob, prompt="hi"))
    recovery.give_up(ready, [], "It no longer fits without lab-2.")
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and "It no longer fits without lab-2." in job.error, job.error
