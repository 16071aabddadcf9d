from clusterpanel.consumers import AdminGroupConsumer


class DeploymentConsumer(AdminGroupConsumer):
    """A deployment's state as it moves from planned to ready (group `deployment_<id>`)."""

    def group_name(self) -> str:
        return f"deployment_{self.scope['url_route']['kwargs']['pk']}"

    async def deployment_status(self, event: dict) -> None:
        await self.send_json({"type": "status", **event["payload"]})

    async def deployment_preseed(self, event: dict) -> None:
        await self.send_json({"type": "preseed", **event["payload"]})

    async def deployment_engine(self, event: dict) -> None:
        await self.send_json({"type": "engine", **event["payload"]})

    async def deployment_verification(self, event: dict) -> None:
        await self.send_json({"type": "verification", **event["payload"]})
