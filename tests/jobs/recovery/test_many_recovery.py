"""Recovery and exactly-once with several jobs in one engine (slots = 4): a laptop killed while four chats stream
fails all four naming it, each is retried once and every retry succeeds (on the same three laptops: the supervisor
has restarted the killed server by the time recovery decides, so the engine reloads the same plan); a 24-line batch
whose engine worker's group is killed with three items in flight ends with every line run exactly once, the
items done before the kill untouched, and never more than three batch items (slots - 1) at once.

Sizes: the chats ask for 150 tokens (the kill lands a few tokens in; the four retries run 150 each, not 300), and
the batch has 24 lines (five or more done before the kill, three interrupted, the rest after it), not 40."""

import json
import os
import signal
from datetime import datetime

import pytest
import requests
from django.utils import timezone

from jobs.batches import output
from jobs.models import Batch, Job, JobStatus
from jobs.queue import stream
from models_app.deploying import deploy
from models_app.models import Deployment, DeploymentStatus
from nodes.models import RpcServer
from nodes.remote import ssh
from tests.conftest import wait_until
from tests.jobs.batches.test_batch_survives_engine_restart import upload as upload_lines
from tests.jobs.cluster import chat

SLOTS = 4
STOPPED_OR_ENDED = (JobStatus.FAILED, JobStatus.SUCCEEDED, JobStatus.CANCELLED)
LINES = 24
ITEM_TOKENS = 64


@pytest.fixture
def cluster_slots() -> int:
    return SLOTS


def tokens_out(job_id: int) -> int:
    return sum(event["event"] == "token" for event in stream.kept(job_id))


def all_streaming(jobs: list[Job], at_least: int) -> bool:
    """Every job RUNNING at once, each with a few tokens out."""
    running = Job.objects.filter(pk__in=[job.pk for job in jobs], status=JobStatus.RUNNING).count()
    return running == len(jobs) and all(tokens_out(job.pk) >= at_least for job in jobs)


def test_it_fails_every_sequence_naming_the_dead_laptop_and_retries_each_once(
        cluster, bob, web_server, celery_worker):
    # Counting prompts run long, so none ends before the kill; 150 tokens keep the retries short. They draft by
    # n-grams (a count repeats its own shape): the kill lands in a step that verifies drafts.
    deploy.set_drafting(cluster, 6)
    jobs = [chat(cluster, bob, f"Count from {n * 100} to {n * 100 + 400}, one number a line.", max_tokens=150)
            for n in range(SLOTS)]
    wait_until(lambda: all_streaming(jobs, 5), 120, "four chats streaming at once")
    victim = cluster.stages.select_related("node", "server").get(position=1)
    ssh.run(victim.node.ssh_target(), ["kill", "-9", str(victim.server.pid)])
    at_kill = {job.pk: tokens_out(job.pk) for job in jobs}

    ids = [job.pk for job in jobs]
    try:
        wait_until(lambda: Job.objects.filter(pk__in=ids, status__in=STOPPED_OR_ENDED).count() == SLOTS, 180,
                   "all four to end")
    finally:  # where each stood, said either way: tokens out at the kill, and its row now
        ended = {job.pk: (job.status, job.attempts, job.completion_tokens, job.error[:100])
                 for job in Job.objects.filter(pk__in=ids)}
    assert all(status == JobStatus.FAILED for status, *_ in ended.values()), (at_kill, ended)
    for job in Job.objects.filter(pk__in=ids):
        assert victim.node.name in job.error and "killed (signal 9)" in job.error, job.error
    wait_until(lambda: Job.objects.filter(retry_of__in=ids).count() == SLOTS, 120, "a retry of each")
    retries = list(Job.objects.filter(retry_of__in=ids))
    assert sorted(retry.retry_of_id for retry in retries) == sorted(ids), "one retry each"
    wait_until(lambda: all(Job.objects.get(pk=retry.pk).is_finished for retry in retries), 240,
               "the retries to finish")
    for retry in Job.objects.filter(pk__in=[retry.pk for retry in retries]):
        assert retry.status == JobStatus.SUCCEEDED, retry.error
        assert retry.completion_tokens > 0 and retry.output.strip()
        assert retry.drafted_tokens > 0, "the reloaded engine drafts as the one before"
    assert not Job.objects.filter(retry_of__in=[retry.pk for retry in retries]).exists(), "retried only once"
    assert Job.objects.filter(retry_of__in=ids).count() == SLOTS, "one retry each"

    cluster.refresh_from_db()
    assert cluster.status == DeploymentStatus.READY and cluster.revision == 1, "the same plan, reloaded"
    assert cluster.stages.count() == 3 and victim.node.name in {s.node.name for s in cluster.stages.all()}
    assert RpcServer.objects.get(pk=victim.server_id).wanted, "its restarted server serves the re-plan"
    assert requests.get(web_server + "/healthz", timeout=30).status_code in (200, 503), "web server still up"
    assert celery_worker.poll() is None, "the ordinary worker is still up"


# The batch


def upload(deployment, user) -> Batch:
    return upload_lines(deployment, user, LINES, tokens=ITEM_TOKENS, span=40)


class Watch:
    """Checks made while waiting also count the batch items RUNNING at that moment, keeping the most seen."""

    def __init__(self, batch: Batch) -> None:
        self.batch, self.most = batch, 0

    def __call__(self, check):
        def watched():
            self.most = max(self.most, self.batch.items.filter(status=JobStatus.RUNNING).count())
            return check()
        return watched


def three_midway(batch: Batch) -> list[Job] | None:
    """Three items RUNNING, each with tokens out and far from its last (so none ends before the kill lands)."""
    running = list(batch.items.filter(status=JobStatus.RUNNING))
    if len(running) == SLOTS - 1 and all(4 <= tokens_out(job.pk) <= ITEM_TOKENS - 24 for job in running):
        return running
    return None


def all_lines_done(batch: Batch) -> bool:
    rows = output.rows(batch)
    return len(rows) == LINES and all(row.job.is_finished for row in rows)


def most_at_once(spans: list[tuple[datetime, datetime]]) -> int:
    """The most spans that overlap at any moment (one ending at the moment another starts does not count)."""
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    most = now = 0
    for _, change in edges:
        now += change
        most = max(most, now)
    return most


def test_most_at_once_counts_overlapping_spans():
    t = [timezone.now() + timezone.timedelta(seconds=s) for s in range(6)]
    assert most_at_once([(t[0], t[2]), (t[1], t[3]), (t[2], t[4])]) == 2
    assert most_at_once([(t[0], t[5]), (t[1], t[3]), (t[2], t[4])]) == 3


def test_it_runs_every_line_once_when_the_engine_dies_with_three_items_in_flight(cluster, bob):
    batch = upload(cluster, bob)
    watch = Watch(batch)
    wait_until(watch(lambda: batch.items.filter(status=JobStatus.SUCCEEDED).count() >= 5), 240, "five items done")
    in_flight = wait_until(watch(lambda: three_midway(batch)), 60, "three items in flight")
    old_worker = Deployment.objects.get(pk=cluster.pk).engine["worker"]
    os.killpg(old_worker, signal.SIGKILL)
    killed_at = timezone.now()
    interrupted = list(batch.items.filter(status=JobStatus.RUNNING))
    assert {job.pk for job in interrupted} == {job.pk for job in in_flight}
    done_before = {job.pk: (job.output, job.finished, job.attempts)
                   for job in batch.items.filter(status=JobStatus.SUCCEEDED)}
    assert 5 <= len(done_before) <= LINES - len(interrupted)
    wait_until(watch(lambda: Deployment.objects.get(pk=cluster.pk).engine.get("worker") not in (None, old_worker)),
               60, "the supervisor to start a new engine worker")
    wait_until(watch(lambda: all_lines_done(batch)), 400, "every line to finish")

    rows = output.rows(batch)
    assert [row.custom_id for row in rows] == [f"q{n}" for n in range(1, LINES + 1)]
    assert all(row.job.status == JobStatus.SUCCEEDED and row.job.output.strip() for row in rows)
    assert batch.items.count() == LINES, "no line needed a second job"
    assert batch.items.filter(status=JobStatus.SUCCEEDED).count() == LINES, "no line succeeded twice"
    for job in batch.items.all():
        expected = 2 if job.pk in {j.pk for j in interrupted} else 1
        assert job.attempts == expected, f"{job.custom_id} ran {job.attempts} times"
    for pk, stored in done_before.items():
        job = batch.items.get(pk=pk)
        assert (job.output, job.finished, job.attempts) == stored, "a stored result was overwritten"

    assert watch.most <= SLOTS - 1, f"{watch.most} batch items ran at once"
    spans = [(job.started, job.finished) for job in batch.items.all()]
    spans += [(job.started, killed_at) for job in interrupted]  # their first runs, cut short by the kill
    assert most_at_once(spans) == SLOTS - 1, "batch items ran three at a time, never more"

    results = [json.loads(line) for line in output.as_jsonl(batch).splitlines()]
    assert len(results) == LINES and len({r["custom_id"] for r in results}) == LINES
    assert all(r["response"]["status_code"] == 200 and r["error"] is None for r in results)
    assert all(r["response"]["body"]["usage"]["completion_tokens"] > 0 for r in results)
