"""A real Celery worker on the test Redis runs the panel's tasks on the same database."""

import os
import time

from clusterpanel import status
from clusterpanel.kit import celery
from clusterpanel.tasks import health
from tests.conftest import wait_until
from tests.services import restart_redis


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


def test_workers_are_asked_again_right_after_a_redis_restart(celery_worker):
    wait_until(lambda: status.check_workers().ok, 30, "the worker to answer")
    restart_redis(0.5)
    # The broker connection kept from before failed its first use ("Connection closed by server"): the status
    # page said the broker could not be asked, and a worker settling its predecessor's actions stopped there.
    first = status.check_workers()
    assert "cannot ask the broker" not in first.detail, first.detail
    assert celery.ping(["nobody@nowhere"]) == []
    wait_until(lambda: status.check_workers().ok, 60, "the worker to answer again after the restart")
