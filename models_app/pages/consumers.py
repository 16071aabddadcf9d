from channels.db import database_sync_to_async

from clusterpanel.kit.consumers import AdminGroupConsumer
from models_app.models import Deployment, GgufModel


class DeploymentConsumer(AdminGroupConsumer):
    """A deployment's state as it moves from planned to ready (group `deployment_<id>`)."""

    def group_name(self) -> str:
        return f"deployment_{self.scope['url_route']['kwargs']['pk']}"

    async def catch_up(self) -> None:
        """Its state now: a socket that reconnects after a drop (a Redis restart) may have missed changes."""
        deployment = await self.current()
        if deployment is None:
            return
        await self.send_json({"type": "status", "status": deployment.status,
                              "label": deployment.get_status_display(), "detail": deployment.status_detail})
        if deployment.engine:
            await self.send_json({"type": "engine", **deployment.engine})

    @database_sync_to_async
    def current(self) -> Deployment | None:
        return Deployment.objects.filter(pk=self.scope["url_route"]["kwargs"]["pk"]).first()

    async def deployment_status(self, event: dict) -> None:
        await self.send_json({"type": "status", **event["payload"]})

    async def deployment_preseed(self, event: dict) -> None:
        await self.send_json({"type": "preseed", **event["payload"]})

    async def deployment_engine(self, event: dict) -> None:
        await self.send_json({"type": "engine", **event["payload"]})

    async def deployment_server(self, event: dict) -> None:
        await self.send_json({"type": "server", **event["payload"]})

    async def deployment_verification(self, event: dict) -> None:
        await self.send_json({"type": "verification", **event["payload"]})


class ModelConsumer(AdminGroupConsumer):
    """A model's checksum as it is computed (group `model_<id>`)."""

    def group_name(self) -> str:
        return f"model_{self.scope['url_route']['kwargs']['pk']}"

    async def catch_up(self) -> None:
        model = await self.current()
        if model is not None:
            await self.send_json({"type": "progress", "status": model.status, "hash_progress": model.hash_progress,
                                  "status_detail": model.status_detail})

    @database_sync_to_async
    def current(self) -> GgufModel | None:
        return GgufModel.objects.filter(pk=self.scope["url_route"]["kwargs"]["pk"]).first()

    async def model_progress(self, event: dict) -> None:
        await self.send_json({"type": "progress", **event["payload"]})
