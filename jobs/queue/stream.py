"""A job's events on their way to listeners: kept in a Redis list for late joiners and published on the
job's Redis channel, in one write per event.

The engine's events (tokens, status, done) have sequence numbers, and the job's attempt: a job its engine dropped
when it died runs again from its first token (ending.requeue), numbered from 1 again. A listener
subscribes first, then reads what is kept, then takes live events with a higher
number only (jobs/chat/consumers.py, jobs/queue/listen.py), so it sees every token once and in
order; a later attempt's first event comes to it after a `restart` event (`Order`), so that no listener
appends one attempt's text to another's. Events from elsewhere (queue places, a cancel while queued, a retry) go
through the channel layer group `job_<id>` and carry no number. Tokens take Redis
pub/sub rather than the channel layer: it costs the web server a fraction of the CPU
per token, and on a small head that CPU is what a stream is slowed by
(bench/panel_overhead.py). Events are kept an hour after the job ends; after that
the job's row in the database has the whole text.
"""

import contextlib
import json
import logging
import time

import redis
import redis.asyncio
from django.conf import settings
from redis.backoff import NoBackoff
from redis.retry import Retry

from clusterpanel.kit.broadcast import broadcast
from clusterpanel.kit.outage import Outage

log = logging.getLogger(__name__)

KEEP_S = 3600
RETRY_S = 1.0  # after Redis failed the engine, how long its events stay held before Redis is tried again
# ... when the try itself waited out the connect timeout (a Redis host gone, not refusing): each try costs the
# generating thread that long, so it is made seldom enough to cost every running answer a few per cent at most.
SLOW_RETRY_S = 10.0


def group(job_id: int) -> str:
    return f"job_{job_id}"


def key(job_id: int) -> str:
    return f"job:{job_id}:events"


def channel(job_id: int) -> str:
    return f"job:{job_id}:live"


def store() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL)


def quick_store() -> redis.Redis:
    """For a read that must not hold up a scrape or a job's end when Redis hangs."""
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)


def hasty_store() -> redis.Redis:
    """For a check a request goes on without when Redis is away (the per-minute limit): a second's wait, one
    retry at once on a new connection (a pooled one may be stale after a restart), no backoff between retries
    (redis-py's default three with backoff held each request up seconds)."""
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1,
                                retry=Retry(NoBackoff(), 1))


def announce_done(job) -> None:
    """A job's end, told to its listeners by whoever settled it outside the engine's stream (a cancel while
    queued, recovery)."""
    broadcast(group(job.pk), "job.event", {"event": "done", **job.summary()})


class Order:
    """One listener's view of a job's numbered events: each once and in order. A later attempt's events (the
    job requeued after its engine died) are numbered from 1 again and follow a `restart` event, which says that
    the text starts again; an ended attempt's late events are dropped. `gap`: a number was skipped in this
    attempt (events sent while nobody could hear them)."""

    def __init__(self) -> None:
        self.attempt: int | None = None
        self.last_seq, self.gap = 0, False

    def accept(self, event: dict) -> list[dict]:
        """What to pass on for `event`: nothing (seen already, or an ended attempt's), it, or `restart` and it."""
        seq = event.get("seq")
        if seq is None:
            return [event]
        attempt = event.get("attempt", 1)
        if self.attempt is None:
            self.attempt = attempt
        if attempt < self.attempt:
            return []
        passed = []
        if attempt > self.attempt:
            passed.append({"event": "restart", "attempt": attempt})
            self.attempt, self.last_seq, self.gap = attempt, 0, False
        if seq <= self.last_seq:
            return passed
        self.gap = self.gap or seq > self.last_seq + 1
        self.last_seq = seq
        return [*passed, event]


def kept(job_id: int) -> list[dict]:
    """Everything sent for this job so far, oldest first."""
    return [json.loads(raw) for raw in store().lrange(key(job_id), 0, -1)]


def told(job_id: int) -> str | None:
    """The text this job's stream has carried for its latest attempt: what a listener was told. None when
    Redis does not answer."""
    quick = quick_store()
    try:
        events = [json.loads(raw) for raw in quick.lrange(key(job_id), 0, -1)]
    except (redis.RedisError, OSError):
        return None
    finally:
        quick.close()
    latest = max((event.get("attempt", 1) for event in events), default=1)
    return "".join(event["text"] for event in events if event["event"] == "token" and event.get("attempt", 1) == latest)


class JobStream:
    """Used by the engine: `token()` per token, `event()` for status changes.

    Each send is one write on a connection of its own that has told Redis not to reply
    (CLIENT REPLY OFF): no reply to wait for and no thread to hand over to, so it costs
    the generating thread one system call. A thread per token cost the engine half a
    millisecond of CPU per token in lock and GIL hand-offs (bench/panel_overhead.py).
    Redis runs a connection's commands in order, so `flush()` knows all is stored once a
    command with a reply comes back.

    Tokens made less than `hold_ms` after the last send of their job wait for the next one and travel
    together: one Redis message and one wake-up of each listener for several tokens,
    which a fast model on a small head pays for in tokens/s. Listeners still get one
    event per token. A token is shown at most `hold_ms` plus one token's time late; the
    first token of a job, and any token after a pause of `hold_ms`, goes at once.

    An engine running several jobs sets `deferring`: tokens due are then sent by
    `send_due()` after each decode step, every job's in one write.

    When Redis fails a write, events stay held and Redis is tried again RETRY_S later. The first write on a new
    connection after a failure rewrites each running job's whole stream: Redis may have restarted empty, and a
    write into a connection Redis had already closed is lost without an error. So a listener that comes back
    finds every event kept, with no hole, and the answer streams live again at once (jobs/queue/listen.py).
    """

    def __init__(self, hold_ms: float | None = None) -> None:
        self.redis = store()
        self.hold_s = (settings.STREAM_HOLD_MS if hold_ms is None else hold_ms) / 1000
        self.seq: dict[int, int] = {}
        self.attempt: dict[int, int] = {}
        self.held: dict[int, list[str]] = {}  # job → its events not sent yet, in order
        self.written: dict[int, list[str]] = {}  # job → its events sent so far, for rewriting its stream
        self.rewrite: set[int] = set()  # jobs whose stream in Redis is written anew with their next send
        self.sent_at: dict[int, float] = {}
        self.due: set[int] = set()
        self.deferring = False
        self._connection = None
        self._retry_at = self._connecting_since = 0.0
        self.outage = Outage(log, "sending job events to Redis (they are held and sent once it answers)")

    def start(self, job_id: int, attempt: int = 1) -> None:
        self.seq[job_id], self.sent_at[job_id], self.written[job_id] = 0, 0.0, []
        self.attempt[job_id] = attempt
        self.held.pop(job_id, None)
        self.rewrite.add(job_id)  # an earlier attempt's events are not this attempt's

    def token(self, job_id: int, text: str) -> None:
        self._hold(job_id, "token", {"text": text, "t": time.time()})
        if time.monotonic() - self.sent_at.get(job_id, 0.0) >= self.hold_s:
            self.due.add(job_id)
            if not self.deferring:
                self.send_due()

    def event(self, job_id: int, kind: str, payload: dict) -> None:
        self._hold(job_id, kind, payload)
        self._send([job_id], stamp=False)  # status events do not count: a job's first token goes at once

    def forget(self, job_id: int) -> None:
        """The job ended and everything of it was sent: its counters go (an engine runs jobs for weeks)."""
        for kept_by_job in (self.seq, self.attempt, self.held, self.written, self.sent_at):
            kept_by_job.pop(job_id, None)
        self.due.discard(job_id)
        self.rewrite.discard(job_id)

    def _hold(self, job_id: int, kind: str, payload: dict) -> None:
        self.seq[job_id] = seq = self.seq.get(job_id, 0) + 1
        self.held.setdefault(job_id, []).append(json.dumps({"seq": seq, "attempt": self.attempt.get(job_id, 1),
                                                            "event": kind, **payload}))

    def send_due(self) -> None:
        due, self.due = self.due, set()
        self._send(sorted(due))

    def _send(self, job_ids, stamp: bool = True) -> None:
        if stamp:
            now = time.monotonic()
            self.sent_at.update((job_id, now) for job_id in job_ids if self.held.get(job_id))
        if self._connection is None and time.monotonic() < self._retry_at:
            return  # Redis failed us a moment ago: generation does not wait on it per token; the events stay held
        sending = sorted({job_id for job_id in job_ids if self.held.get(job_id)} | self.rewrite)
        commands = [command for job_id in sending for command in self._commands(job_id)]
        if not commands:
            return
        try:
            connection = self._connect()
            connection.send_packed_command(connection.pack_commands(commands), check_health=False)
        except (redis.RedisError, OSError) as exc:  # the events stay held, for the first write that works
            self._failed(exc)
            return
        for job_id in sending:
            self.written.setdefault(job_id, []).extend(self.held.pop(job_id, []))
            self.due.discard(job_id)
        self.rewrite.clear()
        self.outage.over()

    def _commands(self, job_id: int) -> list[tuple]:
        rewritten = job_id in self.rewrite
        texts = (self.written.get(job_id, []) if rewritten else []) + self.held.get(job_id, [])
        commands = [("DEL", key(job_id))] if rewritten else []
        if texts:
            message = texts[0] if len(texts) == 1 else "[" + ",".join(texts) + "]"
            commands += [("RPUSH", key(job_id), *texts), ("PUBLISH", channel(job_id), message),
                         ("EXPIRE", key(job_id), KEEP_S)]
        return commands

    def flush(self) -> bool:
        """Send what is held; return once Redis has stored everything sent so far. False when it could not
        confirm that (some events may be lost)."""
        self._send(list(self.held))
        if self.held or (self._connection is None and time.monotonic() < self._retry_at):
            return False
        try:
            connection = self._connect()
            connection.send_command("CLIENT", "REPLY", "ON", check_health=False)
            connection.read_response()
            connection.send_command("CLIENT", "REPLY", "OFF", check_health=False)
        except (redis.RedisError, OSError) as exc:
            self._failed(exc)
            return False
        return True

    def _connect(self):
        if self._connection is None:
            pool = self.redis.connection_pool
            # No retries and short timeouts: a Redis that is down may cost a token now and then, never a stall.
            connection = pool.connection_class(**{**pool.connection_kwargs, "retry": Retry(NoBackoff(), 0),
                                                  "socket_connect_timeout": 0.5, "socket_timeout": 1})
            self._connecting_since = time.monotonic()
            connection.connect()
            connection.send_command("CLIENT", "REPLY", "OFF", check_health=False)
            self._connection = connection
        return self._connection

    def _failed(self, exc: Exception) -> None:
        """Nothing since the last confirmed write is known to be stored: every running job's stream is written
        anew once Redis answers."""
        self.outage.failed(exc)
        self.rewrite.update(self.written)
        waited = time.monotonic() - self._connecting_since if self._connection is None else 0.0
        self._retry_at = time.monotonic() + (SLOW_RETRY_S if waited > 0.25 else RETRY_S)
        if self._connection is not None:
            self._connection.disconnect()
            self._connection = None


def tokens_sent(job_ids: list[int]) -> dict[int, int | None]:
    """How many tokens each job's stream holds, in one round trip: a stream is a status event, perhaps a context
    event, a token each, and at the end a done event. None for all when Redis does not answer."""
    if not job_ids:
        return {}
    quick = quick_store()
    try:
        pipe = quick.pipeline(transaction=False)
        for job_id in job_ids:
            pipe.llen(key(job_id)).lindex(key(job_id), 1).lindex(key(job_id), -1)
        answers = pipe.execute()
    except (redis.RedisError, OSError):
        return dict.fromkeys(job_ids)
    finally:
        quick.close()
    found = {}
    for n, job_id in enumerate(job_ids):
        length, second, last = answers[3 * n:3 * n + 3]
        others = min(length, 1) + _is_event(second, "context") + _is_event(last, "done")
        found[job_id] = max(length - others, 0)
    return found


def _is_event(raw: bytes | None, kind: str) -> bool:
    return raw is not None and f'"event": "{kind}"'.encode() in raw[:64]


CANCEL_CHANNEL = "jobs:cancel"


def new_work_channel(queue: str) -> str:
    """Where a new job for the engine on `queue` is announced (jobs/task_messages.py), besides its Celery message,
    which the engine's worker does not read while its engine is running jobs."""
    return f"{queue}:new"


class _Announcer:
    client: redis.Redis | None = None  # one per process: a batch file's lines are announced one by one


def announce_new_job(queue: str, job_id: int) -> None:
    """Tell a running engine at once that a job came: it takes new jobs between decode steps. Lost, the engine
    still finds the job within a second (it looks in the database that often)."""
    try:
        _Announcer.client = _Announcer.client or redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2)
        _Announcer.client.publish(new_work_channel(queue), job_id)
    except (redis.RedisError, OSError) as exc:
        log.warning("could not announce job %s to its engine: %s", job_id, exc)


WATCHING = Outage(log, "the engine's watch for cancels and new jobs on Redis (it listens again every second)")


class CancelWatch:
    """Which running jobs were asked to stop, and whether new jobs came. A Redis subscriber thread (idle until
    a message comes) sets flags, so the engine's checks after every step cost no round trip."""

    def __init__(self, redis_client: redis.Redis, new_work: str | None = None) -> None:
        self.asked: set[int] = set()
        self.new_work = False
        self.pubsub = redis_client.pubsub(ignore_subscribe_messages=True)
        self._resubscribe, self.pubsub.on_connect = self.pubsub.on_connect, self._on_connect
        channels = {CANCEL_CHANNEL: self._on_message}
        if new_work:
            channels[new_work] = self._on_new_work
        self.pubsub.subscribe(**channels)
        self.thread = self.pubsub.run_in_thread(sleep_time=1.0, daemon=True, exception_handler=self._on_error)

    def _on_message(self, message: dict) -> None:
        self.asked.add(int(message["data"]))

    def _on_new_work(self, message: dict) -> None:
        self.new_work = True

    def take_new_work(self) -> bool:
        """Whether a job came since the last call."""
        came, self.new_work = self.new_work, False
        return came

    @staticmethod
    def _on_error(exc: BaseException, pubsub, thread) -> None:
        """Redis went away: keep the thread (its next read connects and subscribes again), without spinning."""
        WATCHING.failed(exc)
        time.sleep(1.0)

    def _on_connect(self, connection) -> None:
        self._resubscribe(connection)
        WATCHING.over()

    def __call__(self, job_id: int) -> bool:
        return job_id in self.asked

    def forget(self, job_id: int) -> None:
        self.asked.discard(job_id)


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
        self.ready: list[dict] = []  # events that came in one message with the one returned before

    async def open(self) -> "Subscription":
        try:
            await self.pubsub.subscribe(channel(self.job_id))
        except BaseException:  # its Redis client is ours to close: a listener retrying would leak one a try
            with contextlib.suppress(redis.RedisError, OSError):
                await self.close()
            raise
        return self

    async def next(self, timeout: float | None = None) -> dict | None:
        """The next live event, or None when `timeout` passes without one."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.ready:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            message = await self.pubsub.get_message(timeout=left)
            if message:  # None also for the subscription's own confirmation, which is skipped
                events = json.loads(message["data"])
                self.ready = events if isinstance(events, list) else [events]
        return self.ready.pop(0)

    async def close(self) -> None:
        await self.pubsub.aclose()
        await self.client.aclose()
