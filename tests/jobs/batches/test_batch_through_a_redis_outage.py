"""Batch lines the engine reaches while Redis is away (killed, back empty later) run, once each, and succeed:
nothing a batch line needs is in Redis, whose events for it wait in the engine's stream. Before, each failed for
good in milliseconds ("… did not answer. Send it again once Redis is back"). The engine's loop runs in this
process, every layer on the head."""

import threading

import pytest
from django.db import connection

from jobs.batches import service as batches
from jobs.engine import loop
from jobs.models import JobStatus
from models_app.models import Deployment
from tests.conftest import wait_until
from tests.jobs.batches.test_batch_survives_engine_restart import batch_file
from tests.jobs.conftest import engine_child_here, head_deployment
from tests.services import redis_down

pytestmark = pytest.mark.timeout(300)
LINES = 6


@pytest.fixture
def on_the_head(transactional_db) -> Deployment:
    return head_deployment(slots=1)


def serving(job_id: int) -> None:
    try:
        loop.run(job_id)
    finally:
        connection.close()  # this thread's own


def test_batch_lines_reached_while_redis_is_away_run_once_and_succeed(on_the_head, monkeypatch, bob):
    batch = batches.from_file(bob, on_the_head, "six.jsonl", batch_file(lines=LINES, tokens=24, span=10))
    items = batch.items.order_by("pk")
    with engine_child_here(on_the_head, monkeypatch):
        engine = threading.Thread(target=serving, args=(items[0].pk,))
        engine.start()
        wait_until(lambda: items.filter(status=JobStatus.SUCCEEDED).exists(), 180, "a first line to end")
        with redis_down():
            ended_before = items.exclude(status__in=(JobStatus.QUEUED, JobStatus.RUNNING)).count()
            wait_until(lambda: items.exclude(status__in=(JobStatus.QUEUED, JobStatus.RUNNING)).count()
                       >= ended_before + 2, 120, "two more lines to end while Redis was away")
        engine.join(180)
    assert not engine.is_alive(), "the engine's loop hung"

    lines = list(items)
    assert [(line.status, line.error) for line in lines] == [(JobStatus.SUCCEEDED, "")] * LINES
    assert all(line.attempts == 1 and line.output for line in lines), "each ran once, and answered"
