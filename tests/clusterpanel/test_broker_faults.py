"""A Celery worker whose Redis went away while it held tasks survives closing its broken connection
(clusterpanel/broker_faults.py): kombu's channel, closed after its connection, no longer dies handing back its
messages, and Redis still has them to give out again. Real Redis, kombu's own Redis transport."""

import logging
import time
import uuid

import pytest
import redis
from django.conf import settings
from kombu import Connection, Exchange, Queue

import clusterpanel.celery  # noqa: F401  (installs the fix, as every worker does)


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
    with caplog.at_level(logging.WARNING, logger="clusterpanel.broker_faults"):
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
