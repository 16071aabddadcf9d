from channels.generic.websocket import AsyncJsonWebsocketConsumer


class StatusConsumer(AsyncJsonWebsocketConsumer):
    """Panel-wide notices for a signed-in browser (group `panel`)."""

    group = "panel"

    async def connect(self) -> None:
        if not self.scope["user"].is_authenticated:
            await self.close(code=4401)
            return
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        await self.channel_layer.group_discard(self.group, self.channel_name)

    async def panel_notice(self, event: dict) -> None:
        await self.send_json({"type": "notice", "payload": event["payload"]})
