"""A Celery worker whose Redis went away while it held tasks survives closing its broken connection
(clusterpanel/kit/worker_faults.py): kombu's channel, closed after its connection, no longer dies handing back its
messages, and Redis still has them to give out again. Real Redis, kombu's own Redis transport."""

import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import redis
from django.conf import settings
from kombu import Connection, Exchange, Queue

from clusterpanel.kit.celery import app  # installs the fix, as in every worker
from tests.conftest import ROOT, child_env, wait_until

QUEUE = f"worker-faults-{uuid.uuid4().hex[:8]}"


def pool_process(pid: int) -> int | None:
    """The worker's pool process: its one child."""
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    return int(proc.name)
            except (FileNotFoundError, ProcessLookupError, IndexError):
                pass
    return None


@pytest.fixture
def queue():
    name = f"broker-faults-{uuid.uuid4().hex[:8]}"
    yield Queue(name, Exchange(name), name)
    redis.Redis.from_url(settings.REDIS_URL).delete(name)


def holding(queue: Queue, visibility_timeout: float = 3600) -> tuple[Connection, object, list]:
    """A connection whose channel has been given one message and not acknowledged it, as a worker's is while
    its task runs."""
    connection = Connection(settings.REDIS_URL, transport_options={"visibility_timeout": visibility_timeout})
    with connection.Producer() as producer:
        producer.publish({"task": queue.name}, exchange=queue.exchange, routing_key=queue.name, declare=[queue])
    channel, received = connection.channel(), []
    consumer = connection.Consumer(queue, channel=channel, callbacks=[lambda body, message: received.append(body)])
    consumer.qos(prefetch_count=1)
    consumer.consume()
    connection.drain_events(timeout=10)
    assert received == [{"task": queue.name}] and len(channel.qos._delivered) == 1
    return connection, channel, received


def test_a_channel_closed_after_its_connection_keeps_its_message_in_redis_and_says_so(queue, caplog):
    connection, channel, _ = holding(queue, visibility_timeout=1)
    tag = next(iter(channel.qos._delivered))
    connection._do_close_transport()  # the order a worker that lost Redis closes things in
    with caplog.at_level(logging.WARNING, logger="clusterpanel.kit.worker_faults"):
        channel.close()  # kombu alone: AttributeError: 'NoneType' object has no attribute 'hostname'
    assert "Redis went away while this worker held 1 task message" in caplog.text
    assert redis.Redis.from_url(settings.REDIS_URL).hexists("unacked", tag), "Redis still holds it as unacked"

    time.sleep(1.5)  # past the visibility timeout: Redis gives it out again, once
    again = Connection(settings.REDIS_URL, transport_options={"visibility_timeout": 1})
    try:
        received = []
        channel = again.channel()
        channel.qos.restore_visible()
        consumer = again.Consumer(queue, channel=channel, callbacks=[lambda body, message: received.append(body)])
        consumer.consume()
        again.drain_events(timeout=10)
        assert received == [{"task": queue.name}]
    finally:
        again.release()


def test_a_channel_closed_while_its_connection_lives_hands_its_message_back_at_once(queue):
    connection, channel, _ = holding(queue)
    channel.close()
    connection.release()
    assert redis.Redis.from_url(settings.REDIS_URL).llen(queue.name) == 1, "back in the queue, as kombu does"


def test_a_pool_process_that_died_under_its_task_is_one_line_in_words(tmp_path, transactional_db):
    """A real prefork worker whose pool process is killed while its task runs: its log says so in one line."""
    log = tmp_path / "worker.log"
    with open(log, "wb") as out:
        worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", "clusterpanel", "worker", "--pool", "prefork",
                                   "--concurrency", "1", "--queues", QUEUE, "--without-mingle", "--without-gossip",
                                   "--loglevel", "INFO", "--hostname", f"{QUEUE}@%h",
                                   "--include", "tests.celery_sleep"],
                                  cwd=ROOT, env=child_env(), stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: b" ready." in log.read_bytes() or worker.poll() is not None, 60, "the worker to be ready")
        app.send_task("tests.sleep", (600,), queue=QUEUE, ignore_result=True)
        pool = wait_until(lambda: pool_process(worker.pid) if b"received" in log.read_bytes() else None, 60,
                          "the task to reach the pool")
        os.kill(pool, signal.SIGKILL)
        wait_until(lambda: b"died under its task" in log.read_bytes() or b"Traceback" in log.read_bytes(), 60,
                   "the worker to notice")
        text = log.read_text()
        assert "A worker process died under its task: signal 9 (SIGKILL)" in text, text
        assert "Traceback" not in text and "WorkerLostError" not in text, text
        assert worker.poll() is None, "the worker lives on"
    finally:
        worker.terminate()
        worker.wait(30)
