"""A job's events for one HTTP response (Server-Sent Events, or a response that waits for the answer).

Like jobs/consumers.py for sockets: join the job's group first, then read what
was kept, so nothing falls between the two; then take live events, each once,
by sequence number, until the job is done.
"""

import asyncio
from collections.abc import AsyncIterator

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from jobs import stream
from jobs.models import Job

QUIET_S = 2.0  # with nothing heard for this long, ask the database (a job cancelled while queued is only told live)


class JobEvents:
    def __init__(self, job_id: int) -> None:
        self.job_id, self.last_seq = job_id, 0
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
        if self.subscription:
            await self.subscription.close()
        await self.layer.group_discard(stream.group(self.job_id), self.channel)

    async def events(self) -> AsyncIterator[dict]:
        """Every event once and in order, ending with "done"."""
        for event in await sync_to_async(stream.kept)(self.job_id):
            if self.fresh(event):
                yield event
            if event.get("event") == "done":
                return
        while True:
            event = await self.live() or await sync_to_async(ended)(self.job_id)
            if event is not None and self.fresh(event):
                yield event
            if event is not None and event.get("event") == "done":
                return

    def fresh(self, event: dict) -> bool:
        seq = event.get("seq")
        if seq is None:
            return True
        if seq <= self.last_seq:
            return False
        self.last_seq = seq
        return True

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
            event, self.pending_live = self.pending_live.result(), None
            return event
        if self.pending in done:
            message, self.pending = self.pending.result(), None
            return message.get("payload")
        return None


def ended(job_id: int) -> dict | None:
    """A "done" event from the database, for a job that ended without one reaching us."""
    job = Job.objects.get(pk=job_id)
    return {"event": "done", **job.summary()} if job.is_finished else None
