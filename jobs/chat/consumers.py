"""The chat page's socket: one job's tokens and status as they come."""

import asyncio
import logging

from channels.db import database_sync_to_async

from clusterpanel.kit.consumers import REDIS_AWAY, SOCKETS, PanelConsumer
from jobs.models import Job
from jobs.queue import ending, queueing, stream
from jobs.queue.listen import REDIS_DOWN

log = logging.getLogger(__name__)


class JobConsumer(PanelConsumer):
    """A job's tokens and status, for its owner or a lab admin. A socket opened mid-stream first gets
    what was already generated, then the rest; each token once, in order (by attempt and sequence number)."""

    async def connect(self) -> None:
        user = self.scope["user"]
        self.job_id = int(self.scope["url_route"]["kwargs"]["pk"])
        job = await database_sync_to_async(Job.objects.filter(pk=self.job_id).first)()
        if not user.is_authenticated or job is None or not (job.user_id == user.pk or user.is_lab_admin):
            await self.close(code=4403)
            return
        self.group, self.order = stream.group(self.job_id), stream.Order()
        # Listening before reading what was kept: nothing falls between the two.
        await self.channel_layer.group_add(self.group, self.channel_name)
        self.live = await stream.Subscription(self.job_id).open()
        await self.accept()
        kept = await database_sync_to_async(stream.kept)(self.job_id)
        for event in kept:
            await self.relay(event)
        job = await database_sync_to_async(Job.objects.get)(pk=self.job_id)
        if job.is_finished and not any(event.get("event") == "done" for event in kept):
            # Finished before its last event reached Redis (the row is written first): tell it from the row.
            await self.send_json({"event": "done", **await database_sync_to_async(job.summary)()})
        elif not kept:
            place = await database_sync_to_async(queueing.position)(job)
            await self.send_json({"event": "queue", "position": place} if place else
                                 {"event": "status", "status": job.status})
        # Last: a reader that meets Redis gone closes the socket, and a send after that was daphne's traceback
        # ("Attempt to send on a closed protocol", fresh37). What comes meanwhile waits in the subscription.
        self.reader = asyncio.create_task(self.read_live())

    async def __call__(self, scope, receive, send) -> None:
        # Channels skips disconnect() when the channel layer fails under a consumer (Redis went away): let go
        # of the reader and its Redis connection here too, or each outage would leave one per open socket.
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self.let_go()

    async def read_live(self) -> None:
        try:
            while True:
                event = await self.live.next()
                if event is not None:
                    await self.relay(event)
                    if event.get("event") == "done":
                        return  # nothing follows a job's end: the page closes the socket
        except REDIS_DOWN as exc:
            # Closed, not left open and silent: the page reconnects and catches up from what Redis kept and
            # from the job's row (jobs/queue/listen.py says why that is whole).
            SOCKETS.failed(exc)
            await self.close(code=REDIS_AWAY)

    async def disconnect(self, code: int) -> None:
        await self.let_go()

    async def let_go(self) -> None:
        """Stop reading and listening; safe to call twice."""
        reader, live, group = getattr(self, "reader", None), getattr(self, "live", None), getattr(self, "group", None)
        self.reader = self.live = self.group = None
        if reader is not None and reader is not asyncio.current_task():
            reader.cancel()
        try:
            if live is not None:
                await live.close()
            if group is not None:
                await self.channel_layer.group_discard(group, self.channel_name)
        except REDIS_DOWN as exc:  # the group forgets this channel by itself when it expires
            log.debug("job %s: could not stop listening cleanly: %s", self.job_id, exc)

    async def relay(self, event: dict) -> None:
        """Each event once and in order; a job run again after its engine died, from its `restart` on: the page
        starts the answer again rather than append one attempt's text to another's."""
        for passed in self.order.accept(event):
            await self.send_json(passed)

    async def job_event(self, message: dict) -> None:
        await self.relay(message["payload"])

    async def receive_json(self, content: dict, **kwargs) -> None:
        if content.get("action") == "cancel":
            job = await database_sync_to_async(Job.objects.get)(pk=self.job_id)
            await database_sync_to_async(ending.cancel)(job)
