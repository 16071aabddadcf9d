from channels.db import database_sync_to_async

from clusterpanel.kit.consumers import AdminGroupConsumer
from nodes.models import NodeAction


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
