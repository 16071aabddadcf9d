"""Batch pages without an engine: an upload queues its good lines in one go and lists its bad ones; a file
with no good line creates nothing; counts, downloads and cancelling follow each line's last attempt."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone

from clusterpanel.accounts.models import ApiToken, Role, User
from jobs.batches import output as batch_output
from jobs.batches import service as batches
from jobs.engine import recovery
from jobs.models import Batch, Job, JobKind, JobStatus
from jobs.params import Params
from jobs.queue import queueing
from models_app.models import DeploymentStatus
from tests.conftest import PASSWORD
from tests.jobs.standins import ready_deployment
from tests.rows import client_for

CSV = b"custom_id,prompt,max_tokens\nq1,Say hi,8\nq2,,8\nq3,Say bye,8\n"


@pytest.fixture
def deployment(db):
    return ready_deployment()



def upload(user, deployment, data: bytes, name: str = "prompts.csv"):
    return client_for(user).post("/jobs/batches/", {"deployment": deployment.pk,
                                                    "file": SimpleUploadedFile(name, data)})


def finish(job: Job, status: str, output: str = "", error: str = "", **fields) -> Job:
    now = timezone.now()
    Job.objects.filter(pk=job.pk).update(status=status, output=output, error=error, started=now, finished=now,
                                         first_token=now, attempts=1, prompt_tokens=5, completion_tokens=3,
                                         finish_reason="stop" if status == JobStatus.SUCCEEDED else "", **fields)
    job.refresh_from_db()
    return job


def test_it_queues_the_good_lines_and_lists_the_bad_one(bob, deployment, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as wakes:
        response = upload(bob, deployment, CSV)
    batch = Batch.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/jobs/batches/{batch.pk}/"
    items = list(batch.items.all())
    assert [(job.line, job.custom_id, job.status, job.kind) for job in items] == [
        (2, "q1", JobStatus.QUEUED, JobKind.BATCH_ITEM), (4, "q3", JobStatus.QUEUED, JobKind.BATCH_ITEM)]
    assert items[0].messages == [{"role": "user", "content": "Say hi"}]
    assert items[0].params == Params(max_tokens=8).as_dict()
    assert batch.rejected == [{"line": 3, "reason": "The prompt is empty.", "custom_id": "q2"}]
    assert len(wakes) == 1, "the engine is woken once the whole batch is committed"
    page = client_for(bob).get(f"/jobs/batches/{batch.pk}/").content.decode()
    assert "The prompt is empty." in page and 'id="count-queued">2<' in page


def test_a_file_with_no_good_line_creates_nothing(bob, deployment):
    response = upload(bob, deployment, b"prompt,max_tokens\n,8\nHello,0\n")
    page = response.content.decode()
    assert response.status_code == 400 and "No line of the file can run (2 rejected)" in page
    assert "The prompt is empty." in page and "max_tokens must be between 1 and 1024" in page
    assert not Batch.objects.exists() and not Job.objects.exists()


@pytest.mark.parametrize("data, name, message", [
    (b"", "empty.csv", "The submitted file is empty."),
    (b"question\nA\n", "bad.csv", "with a prompt column"),
    (b"prompt\n" + b"x\n" * 30, "long.csv", "a batch takes at most 20"),
    (b"prompt\n" + b"x" * 3000 + b"\n", "big.csv", "a batch file may be at most 2.0"),
])
def test_a_file_that_cannot_be_read_is_refused_plainly(bob, deployment, settings, data, name, message):
    settings.BATCH_MAX_LINES, settings.BATCH_MAX_BYTES = 20, 2048
    response = upload(bob, deployment, data, name)
    assert response.status_code == 400 and message in response.content.decode()
    assert not Batch.objects.exists()


def test_a_deployment_that_is_not_ready_is_not_offered(bob, deployment):
    deployment.set_status(DeploymentStatus.STOPPED)
    response = upload(bob, deployment, CSV)
    assert response.status_code == 400 and "Select a valid choice" in response.content.decode()
    assert not Batch.objects.exists()


def test_only_the_owner_and_lab_admins_see_a_batch(alice, bob, deployment):
    upload(bob, deployment, CSV)
    batch = Batch.objects.get()
    charlie = User.objects.create_user("charlie", "c@example.org", PASSWORD, role=Role.USER)
    for path in ("", "results.jsonl", "results.csv"):
        assert client_for(charlie).get(f"/jobs/batches/{batch.pk}/{path}").status_code == 404
        assert client_for(alice).get(f"/jobs/batches/{batch.pk}/{path}").status_code == 200
    assert client_for(charlie).post(f"/jobs/batches/{batch.pk}/cancel/").status_code == 404


@pytest.fixture
def ran(bob, deployment):
    """q1 succeeded; q3 failed with a laptop, and its retry succeeded; q4 failed; q5 is still queued."""
    data = b"custom_id,prompt\nq1,One\nq2,\nq3,Three\nq4,Four\nq5,Five\n"
    batch = batches.from_file(bob, deployment, "five.csv", data)
    q1, q3, q4, _ = batch.items.all()
    finish(q1, JobStatus.SUCCEEDED, "Hello one")
    finish(q3, JobStatus.FAILED, error="Stopped: lap-2 stopped answering.")
    retry = Job.objects.create(kind=JobKind.BATCH_ITEM, deployment=deployment, user=bob, batch=batch, line=q3.line,
                               custom_id="q3", messages=q3.messages, params=q3.params, retry_of=q3)
    finish(retry, JobStatus.SUCCEEDED, "Hello three")
    finish(q4, JobStatus.FAILED, error="Context length exceeded.")
    return batch


def test_counts_follow_each_lines_last_attempt(ran):
    counts = batches.counts(ran)
    assert {k: counts[k] for k in ("queued", "running", "succeeded", "failed", "cancelled")} == {
        "queued": 1, "running": 0, "succeeded": 2, "failed": 1, "cancelled": 0}
    assert (counts["total"], counts["done"], counts["rejected"], counts["finished"]) == (4, 3, 1, False)


def test_the_jsonl_download_is_the_openai_batch_output_one_row_per_line(ran, bob):
    response = client_for(bob).get(f"/jobs/batches/{ran.pk}/results.jsonl")
    assert response["Content-Disposition"] == f'attachment; filename="batch-{ran.pk}-results.jsonl"'
    rows = [json.loads(line) for line in response.content.decode().splitlines()]
    assert [row["custom_id"] for row in rows] == ["q1", "q2", "q3", "q4", "q5"]
    q1, q2, q3, q4, q5 = rows
    assert q1["error"] is None and q1["response"]["status_code"] == 200
    body = q1["response"]["body"]
    assert body["object"] == "chat.completion" and body["model"] == "standin"
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "Hello one"}
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"] == {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8,
                             "prompt_tokens_details": {"cached_tokens": 0}}
    assert q2["response"]["status_code"] == 400
    assert q2["response"]["body"]["error"]["message"] == "Line 3: The prompt is empty."
    assert q3["response"]["body"]["choices"][0]["message"]["content"] == "Hello three", "the retry's result"
    assert q4["response"]["status_code"] == 500 and "Context length" in q4["response"]["body"]["error"]["message"]
    assert q5["response"] is None and q5["error"]["code"] == "not_finished"
    assert len({row["id"] for row in rows}) == 5


def test_the_csv_download_has_a_row_per_line_with_status_output_error_tokens_and_timings(ran, bob):
    text = client_for(bob).get(f"/jobs/batches/{ran.pk}/results.csv").content.decode()
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(text)))
    assert [(r["line"], r["custom_id"], r["status"]) for r in rows] == [
        ("2", "q1", "succeeded"), ("3", "q2", "rejected"), ("4", "q3", "succeeded"), ("5", "q4", "failed"),
        ("6", "q5", "queued")]
    assert rows[0]["output"] == "Hello one" and rows[0]["completion_tokens"] == "3"
    assert rows[0]["total_s"] != "" and rows[0]["attempts"] == "1"
    assert rows[1]["error"] == "The prompt is empty."
    assert rows[2]["output"] == "Hello three" and rows[2]["attempts"] == "2", "two attempts across the retry"
    assert rows[3]["error"] == "Context length exceeded."


def test_cancel_remaining_cancels_what_has_not_started_and_stops_its_retries(ran, bob):
    response = client_for(bob).post(f"/jobs/batches/{ran.pk}/cancel/")
    assert response.status_code == 302
    ran.refresh_from_db()
    assert ran.cancelled is not None
    assert batches.counts(ran)["cancelled"] == 1 and batches.counts(ran)["finished"]
    q4 = ran.items.get(custom_id="q4")
    recovery.retry([q4.pk])
    assert not Job.objects.filter(retry_of=q4).exists(), "no retry once the batch is cancelled"
    row = batch_output.rows(ran)[-1]
    assert row.job.status == JobStatus.CANCELLED


def test_a_line_waiting_for_its_retry_keeps_the_batch_unfinished_and_its_files_unwritten(bob, deployment):
    """A laptop died under the last line: until recovery retries it or says why not, the batch is not done —
    the page, /api and /v1 agree, and OpenAI's output file is not written without the retry's answer."""
    batch = batches.from_file(bob, deployment, "two.csv", b"prompt\none\ntwo\n")
    first, second = batch.items.order_by("line")
    finish(first, JobStatus.SUCCEEDED, "Hello one")
    finish(second, JobStatus.FAILED, error="Stopped: lap-2 stopped answering during generation.")

    counts = batches.counts(batch)
    assert (counts["retrying"], counts["failed"], counts["done"], counts["finished"]) == (1, 0, 1, False)
    assert 'id="count-retrying">1<' in client_for(bob).get(f"/jobs/batches/{batch.pk}/").content.decode()
    assert client_for(bob).get(f"/api/batches/{batch.pk}/").json()["counts"]["retrying"] == 1
    script = Client(HTTP_AUTHORIZATION=f"Bearer {ApiToken.issue(bob, 'client')[1]}")
    seen = script.get(f"/v1/batches/batch_{batch.pk}").json()
    assert seen["status"] == "in_progress" and seen["output_file_id"] is None, seen
    with pytest.raises(batches.StillRunning, match="1 of its requests"):
        batches.deletion(batch)

    retry = Job.objects.create(kind=JobKind.BATCH_ITEM, deployment=deployment, user=bob, batch=batch,
                               line=second.line, messages=second.messages, params=second.params, retry_of=second)
    assert batches.counts(batch)["retrying"] == 0 and batches.counts(batch)["queued"] == 1
    finish(retry, JobStatus.SUCCEEDED, "Hello two")
    done = script.get(f"/v1/batches/batch_{batch.pk}").json()
    assert done["status"] == "completed" and done["request_counts"] == {"total": 2, "completed": 2, "failed": 0}


def test_a_line_recovery_will_not_retry_is_failed_and_the_batch_done(bob, deployment):
    batch = batches.from_file(bob, deployment, "one.csv", b"prompt\none\n")
    only = batch.items.get()
    finish(only, JobStatus.FAILED, error="Stopped: lap-2 stopped answering.")
    recovery.not_retried([only], "Its retries are used up (JOB_RETRIES=1).")
    counts = batches.counts(batch)
    assert (counts["retrying"], counts["failed"], counts["finished"]) == (0, 1, True)


def test_cancelling_a_batch_whose_last_line_waits_for_a_retry_cancels_the_retry(bob, deployment):
    batch = batches.from_file(bob, deployment, "one.csv", b"prompt\none\n")
    only = batch.items.get()
    finish(only, JobStatus.FAILED, error="Stopped: lap-2 stopped answering.")
    assert batches.cancel_remaining(batch) == 1
    batch.refresh_from_db()
    assert batch.cancelled is not None
    recovery.retry([only.pk])
    assert not Job.objects.filter(retry_of=only).exists() and batches.counts(batch)["finished"]


def test_a_line_waiting_for_a_retry_of_a_stopped_deployment_is_failed(bob, deployment):
    batch = batches.from_file(bob, deployment, "one.csv", b"prompt\none\n")
    finish(batch.items.get(), JobStatus.FAILED, error="Stopped: lap-2 stopped answering.")
    assert batches.counts(batch)["retrying"] == 1
    deployment.set_status(DeploymentStatus.STOPPED, "Stopped by alice.")
    counts = batches.counts(batch)
    assert (counts["retrying"], counts["failed"], counts["finished"]) == (0, 1, True)
    assert batch_output.rows(batch)[0].status == JobStatus.FAILED


def test_a_retry_queued_as_its_batch_was_cancelled_never_runs(bob, deployment):
    """Recovery checked the batch, the person cancelled it, then recovery queued the retry: the engine's claim
    cancels it instead of running it."""
    batch = batches.from_file(bob, deployment, "one.csv", b"prompt\none\n")
    first = batch.items.get()
    finish(first, JobStatus.FAILED, error="Stopped: lap-2 stopped answering.")
    Batch.objects.filter(pk=batch.pk).update(cancelled=timezone.now())
    late = Job.objects.create(kind=JobKind.BATCH_ITEM, deployment=deployment, user=bob, batch=batch, line=first.line,
                              messages=first.messages, params=first.params, retry_of=first)
    assert queueing.claim_next(deployment.pk) is None
    late.refresh_from_db()
    assert late.status == JobStatus.CANCELLED and batches.counts(Batch.objects.get(pk=batch.pk))["finished"]


def test_a_line_waiting_for_its_retry_is_not_finished_in_the_downloads(bob, deployment):
    batch = batches.from_file(bob, deployment, "one.csv", b"prompt\none\n")
    finish(batch.items.get(), JobStatus.FAILED, error="Stopped: lap-2 stopped answering.")
    line = json.loads(batch_output.as_jsonl(batch))
    assert line["response"] is None and line["error"]["code"] == "not_finished", line
    assert '"retrying"' in batch_output.as_csv(batch)
