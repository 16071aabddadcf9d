"""A job's events for one HTTP response (Server-Sent Events, or a response that waits for the answer).

Like jobs/chat/consumers.py for sockets: join the job's group first, then read what
was kept, so nothing falls between the two; then take live events, each once,
by sequence number, until the job is done. A job run again after its engine died starts again with a
`restart` event (stream.Order): its listener compares the new text with what it already gave.

Redis may go away under a listener (a restart, a crash). The listener then keeps
asking the database, which outlives Redis, whether the job ended, and listens
again once Redis is back; if it is gone for longer than REDIS_OUTAGE_S, `events()`
raises StreamLost for the caller to say so. Tokens sent while nobody could hear
them leave a hole in the sequence numbers: from the first hole on, tokens are
held back (`gap`), and the answer's rest comes whole from the job's row with
"done", so what a client reads is never missing a piece in the middle.
"""

import asyncio
import logging
import time
from collections.abc import AsyncIterator

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from redis.exceptions import RedisError

from clusterpanel.kit.outage import Outage
from jobs.models import Job
from jobs.queue import stream

log = logging.getLogger(__name__)
QUIET_S = 2.0  # with nothing heard for this long, ask the database (a job cancelled while queued is only told live)
REDIS_DOWN = (RedisError, OSError)
LISTENING = Outage(log, "requests listening for their jobs' events on Redis (they wait for it, asking the database)")


class StreamLost(RuntimeError):
    pass


class JobEvents:
    def __init__(self, job_id: int) -> None:
        self.job_id, self.order = job_id, stream.Order()
        self.layer, self.channel, self.pending, self.pending_live = get_channel_layer(), "", None, None
        self.subscription: stream.Subscription | None = None

    async def open(self) -> "JobEvents":
        self.channel = await self.layer.new_channel()
        await self.layer.group_add(stream.group(self.job_id), self.channel)
        self.subscription = await stream.Subscription(self.job_id).open()
        return self

    async def close(self) -> None:
        for pending in (self.pending, self.pending_live):
            if pending:
                pending.cancel()
                pending.add_done_callback(forget)  # one that failed with Redis has said so already
        self.pending = self.pending_live = None
        try:
            if self.subscription:
                await self.subscription.close()
            if self.channel:
                await self.layer.group_discard(stream.group(self.job_id), self.channel)
        except REDIS_DOWN as exc:  # the group forgets us by itself when it expires
            log.debug("job %s: could not stop listening cleanly: %s", self.job_id, exc)
        self.subscription = None

    async def events(self) -> AsyncIterator[dict]:
        """Every event once and in order, ending with "done"."""
        for event in await sync_to_async(stream.kept)(self.job_id):
            for passed in self.fresh(event):
                yield passed
            if event.get("event") == "done":
                return
        while True:
            try:
                found = [await self.live() or await sync_to_async(ended)(self.job_id)]
            except REDIS_DOWN as exc:
                LISTENING.failed(exc)
                found = await self.listen_again()
            for event in found:
                for passed in self.fresh(event) if event is not None else []:
                    yield passed
                if event is not None and event.get("event") == "done":
                    return

    def fresh(self, event: dict) -> list[dict]:
        """What to pass on: each event once, in order, a later attempt's after a `restart` (stream.Order); from
        a hole in this attempt's numbers on, no token: the rest comes whole with "done"."""
        return [passed for passed in self.order.accept(event)
                if not (self.order.gap and passed.get("event") == "token")]

    async def live(self) -> dict | None:
        """The next event, from the engine (Redis) or from the group, or None after a quiet spell. One receive
        of each stays pending across calls: cancelling a channel layer's receive can drop what it buffered."""
        if self.pending is None:
            self.pending = asyncio.ensure_future(self.layer.receive(self.channel))
        if self.pending_live is None:
            self.pending_live = asyncio.ensure_future(self.subscription.next())
        done, _ = await asyncio.wait({self.pending, self.pending_live}, timeout=QUIET_S,
                                     return_when=asyncio.FIRST_COMPLETED)
        if self.pending_live in done:
            task, self.pending_live = self.pending_live, None
            return task.result()
        if self.pending in done:
            task, self.pending = self.pending, None
            return task.result().get("payload")
        return None

    async def listen_again(self) -> list[dict | None]:
        """After Redis failed us: the job's end from the database if it came meanwhile, else what Redis still
        kept once it answers again (events of the outage are gone: a hole `fresh()` will see)."""
        await self.close()
        outage_s = settings.REDIS_OUTAGE_S
        deadline, pause = time.monotonic() + outage_s, 0.5
        while True:
            done = await sync_to_async(ended)(self.job_id)
            if done is not None:
                return [done]
            try:
                await self.open()
                kept = await sync_to_async(stream.kept)(self.job_id)
                LISTENING.over()
                return kept or [None]
            except REDIS_DOWN as exc:
                await self.close()
                if time.monotonic() > deadline:
                    raise StreamLost(f"Redis has been unreachable for {outage_s} s ({exc}).") from None
            await asyncio.sleep(pause)
            pause = min(pause * 2, 1.0)  # once Redis is back, the answer streams again within a second


def forget(task: asyncio.Future) -> None:
    if not task.cancelled():
        task.exception()


def ended(job_id: int) -> dict | None:
    """A "done" event from the database, for a job that ended without one reaching us."""
    job = Job.objects.get(pk=job_id)
    return {"event": "done", **job.summary()} if job.is_finished else None


QUIET = object()  # what `Next.get` gives when nothing came in time


class Next:
    """The next of a job's events, waited for at most a while: a wait that times out goes on at the next call,
    so an answer can say something meanwhile (a streamed answer's keep-alive) and lose no event."""

    def __init__(self, events: AsyncIterator[dict]) -> None:
        self.events, self.task = events, None

    async def get(self, within: float | None) -> dict | object:
        """The next event, QUIET after `within` seconds without one; StopAsyncIteration after the last."""
        if self.task is None:
            self.task = asyncio.ensure_future(anext(self.events))
        done, _ = await asyncio.wait({self.task}, timeout=within)
        if not done:
            return QUIET
        task, self.task = self.task, None
        return task.result()

    async def close(self) -> None:
        if self.task is not None:
            task, self.task = self.task, None
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, StopAsyncIteration, *REDIS_DOWN, StreamLost):
                pass

