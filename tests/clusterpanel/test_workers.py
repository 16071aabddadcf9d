"""A real Celery worker on the test Redis runs the panel's tasks on the same database."""

import os
import time

from clusterpanel import status
from clusterpanel.tasks import health


def test_it_runs_a_task_in_a_worker_that_sees_the_same_database(celery_worker, alice, bob):
    answer = health.delay().get(timeout=60)
    assert answer["pid"] not in (os.getpid(), None)
    assert answer["database"] is True
    assert answer["users"] == 2


def test_it_reports_workers_answering(celery_worker):
    deadline = time.monotonic() + 30
    check = status.check_workers()
    while not check.ok and time.monotonic() < deadline:
        time.sleep(0.5)
        check = status.check_workers()
    assert check.ok, check.detail


def test_it_reports_when_no_worker_answers(db):
    check = status.check_workers()
    assert not check.ok
    assert "no worker answered" in check.detail
