from channels.generic.websocket import AsyncJsonWebsocketConsumer


class NodeConsumer(AsyncJsonWebsocketConsumer):
    """Live news of one laptop (group `node_<id>`) for lab admins."""

    async def connect(self) -> None:
        user = self.scope["user"]
        if not user.is_authenticated or not user.is_lab_admin:
            await self.close(code=4403)
            return
        self.group = f"node_{self.scope['url_route']['kwargs']['node_id']}"
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def node_action(self, event: dict) -> None:
        await self.send_json({"type": "action", **event["payload"]})
