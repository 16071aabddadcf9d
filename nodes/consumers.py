from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from nodes.models import NodeAction


class AdminGroupConsumer(AsyncJsonWebsocketConsumer):
    """Joins one group, for lab admins only; subclasses name the group and relay its events."""

    async def connect(self) -> None:
        user = self.scope["user"]
        if not user.is_authenticated or not user.is_lab_admin:
            await self.close(code=4403)
            return
        self.group = self.group_name()
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self.catch_up()

    async def catch_up(self) -> None:
        """What happened between the page being drawn and this socket opening."""

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    def group_name(self) -> str:
        raise NotImplementedError


class NodeConsumer(AdminGroupConsumer):
    """Live news of one laptop (group `node_<id>`): actions, samples, online state."""

    def group_name(self) -> str:
        return f"node_{self.scope['url_route']['kwargs']['node_id']}"

    async def catch_up(self) -> None:
        for payload in await self.recent_actions():
            await self.send_json({"type": "action", **payload})

    @database_sync_to_async
    def recent_actions(self) -> list[dict]:
        node_id = self.scope["url_route"]["kwargs"]["node_id"]
        return [action.payload() for action in reversed(NodeAction.objects.filter(node_id=node_id)[:10])]

    async def node_action(self, event: dict) -> None:
        await self.send_json({"type": "action", **event["payload"]})

    async def node_metrics(self, event: dict) -> None:
        await self.send_json({"type": "metrics", **event["payload"]})

    async def node_state(self, event: dict) -> None:
        await self.send_json({"type": "state", **event["payload"]})


class DashboardConsumer(AdminGroupConsumer):
    """Samples and online state of every laptop (group `dashboard`)."""

    def group_name(self) -> str:
        return "dashboard"

    async def dashboard_metrics(self, event: dict) -> None:
        await self.send_json({"type": "metrics", **event["payload"]})

    async def dashboard_state(self, event: dict) -> None:
        await self.send_json({"type": "state", **event["payload"]})
