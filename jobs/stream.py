"""A job's events on their way to listeners: kept in a Redis list for late joiners and published on the
job's Redis channel, in one round trip per event.

The engine's events (tokens, status, done) have sequence numbers. A listener
subscribes first, then reads what is kept, then takes live events with a higher
number only (jobs/consumers.py, jobs/listen.py), so it sees every token once and in
order. Events from elsewhere (queue places, a cancel while queued, a retry) go
through the channel layer group `job_<id>` and carry no number. Tokens take Redis
pub/sub rather than the channel layer: it costs the web server a fraction of the CPU
per token, and on a small head that CPU is what a stream is slowed by
(bench/panel_overhead.py). Events are kept an hour after the job ends; after that
the job's row in the database has the whole text.
"""

import json
import logging
import queue
import threading
import time

import redis
import redis.asyncio
from django.conf import settings

log = logging.getLogger(__name__)

KEEP_S = 3600


def group(job_id: int) -> str:
    return f"job_{job_id}"


def key(job_id: int) -> str:
    return f"job:{job_id}:events"


def channel(job_id: int) -> str:
    return f"job:{job_id}:live"


def store() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL)


def kept(job_id: int) -> list[dict]:
    """Everything sent for this job so far, oldest first."""
    return [json.loads(raw) for raw in store().lrange(key(job_id), 0, -1)]


class JobStream:
    """Used by the engine: `token()` per token, `event()` for status changes; never blocks generation
    (a thread of its own sends, in order)."""

    def __init__(self) -> None:
        self.redis = store()
        self.seq: dict[int, int] = {}
        self.queue: queue.Queue = queue.Queue()
        threading.Thread(target=self._send, name="job-stream", daemon=True).start()

    def start(self, job_id: int) -> None:
        self.redis.delete(key(job_id))  # an earlier attempt's tokens are not this attempt's
        self.seq[job_id] = 0

    def token(self, job_id: int, text: str) -> None:
        self.event(job_id, "token", {"text": text, "t": time.time()})

    def event(self, job_id: int, kind: str, payload: dict) -> None:
        self.seq[job_id] = seq = self.seq.get(job_id, 0) + 1
        self.queue.put((job_id, json.dumps({"seq": seq, "event": kind, **payload}), kind != "token" or seq == 1))

    def flush(self, timeout: float = 5.0) -> None:
        """Wait until everything given so far has been sent."""
        done = threading.Event()
        self.queue.put(done)
        done.wait(timeout)

    def _send(self) -> None:
        while True:
            item = self.queue.get()
            if isinstance(item, threading.Event):
                item.set()
                continue
            job_id, text, refresh = item
            try:
                pipe = self.redis.pipeline(transaction=False)
                pipe.rpush(key(job_id), text)
                if refresh:
                    pipe.expire(key(job_id), KEEP_S)
                pipe.publish(channel(job_id), text)
                pipe.execute()
            except redis.RedisError as exc:  # the job's row stays the truth; a listener catches up from it
                log.warning("could not send job %s's event: %s", job_id, exc)


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


class Subscription:
    """A listener's side (in the web server): the job's live events from Redis, for `async for`."""

    def __init__(self, job_id: int) -> None:
        self.client = redis.asyncio.Redis.from_url(settings.REDIS_URL)  # its own: event loops come and go
        self.pubsub = self.client.pubsub(ignore_subscribe_messages=True)
        self.job_id = job_id

    async def open(self) -> "Subscription":
        await self.pubsub.subscribe(channel(self.job_id))
        return self

    async def next(self, timeout: float | None = None) -> dict | None:
        """The next live event, or None when `timeout` passes without one."""
        message = await self.pubsub.get_message(timeout=timeout)
        return json.loads(message["data"]) if message else None

    async def close(self) -> None:
        await self.pubsub.aclose()
        await self.client.aclose()
