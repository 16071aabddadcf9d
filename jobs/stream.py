"""A job's events on their way to listeners: sent to the job's group and kept in Redis for late joiners.

Every event has a sequence number. A browser that (re)connects mid-stream reads
what is kept, then takes live events with a higher number only (jobs/consumers.py),
so it sees every token once and in order. Events are kept an hour after the job ends;
after that the job's row in the database has the whole text.
"""

import json
import time

import redis
from django.conf import settings

from clusterpanel.broadcast import Publisher

KEEP_S = 3600


def group(job_id: int) -> str:
    return f"job_{job_id}"


def key(job_id: int) -> str:
    return f"job:{job_id}:events"


def store() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL)


def kept(job_id: int) -> list[dict]:
    """Everything sent for this job so far, oldest first."""
    return [json.loads(raw) for raw in store().lrange(key(job_id), 0, -1)]


class JobStream:
    """Used by the engine: `token()` per token, `event()` for status changes; never blocks generation."""

    def __init__(self, publisher: Publisher | None = None) -> None:
        self.publisher = publisher or Publisher()
        self.redis = store()
        self.seq: dict[int, int] = {}

    def start(self, job_id: int) -> None:
        self.redis.delete(key(job_id))  # an earlier attempt's tokens are not this attempt's
        self.seq[job_id] = 0

    def token(self, job_id: int, text: str) -> None:
        self.event(job_id, "token", {"text": text, "t": time.time()})

    def event(self, job_id: int, kind: str, payload: dict) -> None:
        self.seq[job_id] = seq = self.seq.get(job_id, 0) + 1
        message = {"seq": seq, "event": kind, **payload}

        def keep() -> None:
            if seq > 1 and kind == "token":
                self.redis.rpush(key(job_id), json.dumps(message))  # one round trip per token
                return
            pipe = self.redis.pipeline()
            pipe.rpush(key(job_id), json.dumps(message))
            pipe.expire(key(job_id), KEEP_S)
            pipe.execute()

        self.publisher.send(group(job_id), "job.event", message, then=keep)

    def flush(self) -> None:
        self.publisher.flush()


CANCEL_CHANNEL = "jobs:cancel"


class CancelWatch:
    """Which running jobs were asked to stop. A Redis subscriber thread (idle until a message comes) sets a
    flag, so the engine's check after every token costs no round trip."""

    def __init__(self, redis_client: redis.Redis) -> None:
        self.asked: set[int] = set()
        self.pubsub = redis_client.pubsub(ignore_subscribe_messages=True)
        self.pubsub.subscribe(**{CANCEL_CHANNEL: self._on_message})
        self.thread = self.pubsub.run_in_thread(sleep_time=1.0, daemon=True)

    def _on_message(self, message: dict) -> None:
        self.asked.add(int(message["data"]))

    def __call__(self, job_id: int) -> bool:
        return job_id in self.asked


def ask_to_cancel(job_id: int, cancel_key: str) -> None:
    """The key covers an engine that was not yet listening; the message stops a running one at once."""
    client = store()
    client.set(cancel_key, 1, ex=3600)
    client.publish(CANCEL_CHANNEL, job_id)
