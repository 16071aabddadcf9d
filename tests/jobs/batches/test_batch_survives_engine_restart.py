"""A 14-line batch on a real deployment loses nothing and does nothing twice when its engine worker's whole
process group is killed midway: the supervisor starts a new one, the interrupted item runs again (its result
was never stored), the items already done keep their results untouched, and every line ends with one result.
And a chat sent while a batch runs waits for the item under way, not for the batch."""

import json
import os
import signal

from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from jobs.batches import output
from jobs.models import Batch, Job, JobStatus
from jobs.queue import queueing, stream
from models_app.models import Deployment
from tests.conftest import wait_until
from tests.jobs.cluster import GREEDY, chat

LINES = 14  # room for the kill after five done (it may take a few tries) with lines left to run


def batch_file(lines: int = LINES, tokens: int = 40, span: int = 30) -> bytes:
    body = {key: value for key, value in GREEDY.items() if key != "stop"}
    rows = [{"custom_id": f"q{n}", "method": "POST", "url": "/v1/chat/completions",
             "body": {"model": "smollm2", "max_tokens": tokens, **body,
                      "messages": [{"role": "user", "content": f"Count from {n} to {n + span}, one number a line."}]}}
            for n in range(1, lines + 1)]
    return "\n".join(json.dumps(row) for row in rows).encode()


def upload(deployment, user, lines: int = LINES, tokens: int = 40, span: int = 30) -> Batch:
    client = Client()
    client.force_login(user)
    response = client.post("/jobs/batches/", {"deployment": deployment.pk, "file": SimpleUploadedFile(
        f"{lines}-lines.jsonl", batch_file(lines, tokens, span))})
    assert response.status_code == 302, response.content.decode()
    return Batch.objects.get()


def under_way(batch: Batch):
    """An item that is generating right now (a few tokens out)."""
    job = batch.items.filter(status=JobStatus.RUNNING).first()
    return job if job and len(stream.kept(job.pk)) >= 4 else None


def all_lines_done(batch: Batch) -> bool:
    rows = output.rows(batch)
    return len(rows) == LINES and all(row.job.is_finished for row in rows)


def kill_the_engine_under_an_item(deployment, batch: Batch) -> tuple[list[Job], dict]:
    """SIGKILL the engine worker's group while an item is under way: (the items it interrupted, the results
    stored before). An item seen under way can still finish before the kill lands (40 tokens take under a
    second); then no item was interrupted, and the next engine worker is killed under its item instead."""
    for _ in range(5):
        wait_until(lambda: under_way(batch), 60, "an item under way")
        old_worker = Deployment.objects.get(pk=deployment.pk).engine["worker"]
        os.killpg(old_worker, signal.SIGKILL)
        interrupted = list(batch.items.filter(status=JobStatus.RUNNING))
        done_before = {job.pk: (job.output, job.finished, job.attempts)
                       for job in batch.items.filter(status=JobStatus.SUCCEEDED)}
        wait_until(lambda old=old_worker: Deployment.objects.get(pk=deployment.pk).engine.get("worker") not in
                   (None, old), 60, "the supervisor to start a new engine worker")
        if interrupted:
            return interrupted, done_before
    raise AssertionError("every item seen under way finished before its engine was killed")


def test_it_resumes_after_the_engine_group_is_killed_and_runs_every_line_once(cluster, bob):
    batch = upload(cluster, bob)
    wait_until(lambda: batch.items.filter(status=JobStatus.SUCCEEDED).count() >= 5, 180, "five items done")
    interrupted, done_before = kill_the_engine_under_an_item(cluster, batch)
    assert len(interrupted) == 1 and 5 <= len(done_before) < LINES - 1
    wait_until(lambda: all_lines_done(batch), 300, "every line to finish")

    rows = output.rows(batch)
    assert [row.custom_id for row in rows] == [f"q{n}" for n in range(1, LINES + 1)]
    assert all(row.job.status == JobStatus.SUCCEEDED and row.job.output.strip() for row in rows)
    assert batch.items.count() == LINES, "no line needed a second job"
    assert batch.items.filter(status=JobStatus.SUCCEEDED).count() == LINES, "no line succeeded twice"
    again = batch.items.get(pk=interrupted[0].pk)
    assert again.attempts == 2, "the interrupted item ran again: its first result was never stored"
    for job in batch.items.exclude(pk=again.pk):
        assert job.attempts == 1, f"{job.custom_id} ran {job.attempts} times"
    for pk, stored in done_before.items():
        job = batch.items.get(pk=pk)
        assert (job.output, job.finished, job.attempts) == stored, "a stored result was overwritten"

    results = [json.loads(line) for line in output.as_jsonl(batch).splitlines()]
    assert len(results) == LINES and len({r["custom_id"] for r in results}) == LINES
    assert all(r["response"]["status_code"] == 200 and r["error"] is None for r in results)
    assert all(r["response"]["body"]["usage"]["completion_tokens"] > 0 for r in results)


def test_a_chat_sent_during_a_batch_runs_after_the_item_under_way(cluster, bob):
    batch = upload(cluster, bob)
    wait_until(lambda: under_way(batch), 120, "an item under way")
    job = chat(cluster, bob, "Say hello.", max_tokens=8)
    # Next, or already running: on a busy machine the item under way can end before the chat is asked.
    assert queueing.position(job) in (0, 1), "ahead of every waiting item"

    wait_until(lambda: Job.objects.get(pk=job.pk).is_finished, 120, "the chat to finish")
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED
    meanwhile = batch.items.filter(started__gt=job.created, started__lt=job.started).count()
    # 1: an item claimed in the moment between the chat row's timestamp and its commit
    assert meanwhile <= 1, f"{meanwhile} batch items started while the chat waited"
    wait_until(lambda: all_lines_done(batch), 300, "every line to finish")
    assert batch.items.filter(started__gt=job.finished).count() >= LINES // 2, "the batch went on after the chat"
