"""The batches page's socket: a batch's counts as its items start and end."""

from channels.db import database_sync_to_async

from clusterpanel.kit.consumers import PanelConsumer
from jobs.batches import service as batches
from jobs.models import Batch


class BatchConsumer(PanelConsumer):
    """A batch's counts for its owner or a lab admin (group `batch_<id>`): sent on connect, so a page
    drawn a while ago is right at once, and again whenever an item starts or ends."""

    async def connect(self) -> None:
        user = self.scope["user"]
        self.batch_id = int(self.scope["url_route"]["kwargs"]["pk"])
        batch = await database_sync_to_async(Batch.objects.filter(pk=self.batch_id).first)()
        if not user.is_authenticated or batch is None or not (batch.user_id == user.pk or user.is_lab_admin):
            await self.close(code=4403)
            return
        self.group = batches.group(self.batch_id)
        await self.channel_layer.group_add(self.group, self.channel_name)  # before counting: nothing falls between
        await self.accept()
        await self.send_counts()

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def send_counts(self) -> None:
        counts = await database_sync_to_async(lambda: batches.counts(Batch.objects.get(pk=self.batch_id)))()
        await self.send_json({"type": "counts", **counts})

    async def batch_progress(self, message: dict) -> None:
        await self.send_counts()
