"""The engine's watch for cancels and new jobs through a Redis restart (killed, back empty three seconds later):
it hears a cancel sent after Redis is back, and its log says the outage once and its end with a count, where it
wrote a line every second of the outage."""

import logging
import time

from clusterpanel.kit.outage import Outage
from jobs.queue import stream
from tests.services import redis_down

JOB = 920_001


def subscribed() -> bool:
    return stream.store().pubsub_numsub(stream.CANCEL_CHANNEL)[0][1] >= 1


def test_the_watch_hears_a_cancel_after_a_redis_restart_and_says_the_outage_once(caplog, monkeypatch):
    monkeypatch.setattr(stream, "WATCHING", Outage(stream.log, "the engine's watch"), raising=False)
    watch = stream.CancelWatch(stream.store())
    try:
        with caplog.at_level(logging.INFO, logger="jobs.queue.stream"):
            with redis_down():
                time.sleep(3)
            deadline = time.monotonic() + 10
            while not subscribed() and time.monotonic() < deadline:
                time.sleep(0.1)  # the watch's thread listens again on its own time
            stream.ask_to_cancel(JOB, "job:920001:cancel")
            deadline = time.monotonic() + 5
            while not watch(JOB) and time.monotonic() < deadline:
                time.sleep(0.05)
    finally:
        watch.thread.stop()
        watch.thread.join(5)
        watch.pubsub.close()

    assert watch(JOB), "the cancel sent after Redis' return was heard"
    said = [r.getMessage() for r in caplog.records if r.name == "jobs.queue.stream"]
    assert len(said) == 2 and "failed" in said[0] and "works again, after" in said[1], said
