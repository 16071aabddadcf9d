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
