"""A batch is deleted with its results, after asking; never while the engine still holds one of its items,
and only by its owner or a lab admin."""


from jobs.models import Batch, Job, JobKind, JobStatus
from tests.jobs.standins import ready_deployment
from tests.rows import client_for


def batch_of(user, statuses) -> Batch:
    deployment = ready_deployment()
    batch = Batch.objects.create(user=user, deployment=deployment, name="prompts.csv", input_format="csv")
    for n, status in enumerate(statuses):
        Job.objects.create(kind=JobKind.BATCH_ITEM, deployment=deployment, user=user, batch=batch, custom_id=f"q{n}",
                           messages=[{"role": "user", "content": "hi"}], params={}, status=status)
    return batch


def test_a_finished_batch_is_deleted_with_its_results_after_asking(bob):
    batch = batch_of(bob, [JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED])
    client = client_for(bob)
    page = client.get(f"/jobs/batches/{batch.pk}/delete/").content.decode()
    assert f"Delete batch #{batch.pk}?" in page and "results of its 3 requests are deleted" in page
    assert Job.objects.filter(batch=batch).count() == 3
    assert client.post(f"/jobs/batches/{batch.pk}/delete/").status_code == 302
    assert not Batch.objects.filter(pk=batch.pk).exists() and not Job.objects.filter(batch_id=batch.pk).exists()
    assert client.get(f"/jobs/batches/{batch.pk}/").status_code == 404


def test_a_batch_with_items_in_flight_is_not_deleted(bob):
    batch = batch_of(bob, [JobStatus.SUCCEEDED, JobStatus.RUNNING, JobStatus.QUEUED])
    response = client_for(bob).post(f"/jobs/batches/{batch.pk}/delete/")
    assert response.status_code == 409
    assert "2 of its requests are still running or waiting: cancel the remaining" in response.content.decode()
    assert Job.objects.filter(batch=batch).count() == 3


def test_only_its_owner_or_a_lab_admin_deletes_it(bob, alice, django_user_model):
    batch = batch_of(alice, [JobStatus.SUCCEEDED])
    assert client_for(bob).post(f"/jobs/batches/{batch.pk}/delete/").status_code == 404
    assert Batch.objects.filter(pk=batch.pk).exists()
    theirs = batch_of(bob, [JobStatus.SUCCEEDED])
    assert client_for(alice).post(f"/jobs/batches/{theirs.pk}/delete/").status_code == 302
    assert not Batch.objects.filter(pk=theirs.pk).exists()
