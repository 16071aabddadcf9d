"""The panel's sockets share one base: what Redis failing under a socket does to it and to the log."""

import contextlib
import logging

from channels.generic.websocket import AsyncJsonWebsocketConsumer
from redis.exceptions import RedisError

from clusterpanel.kit.outage import Outage

log = logging.getLogger(__name__)
REDIS_DOWN = (RedisError, OSError)
# The close code that asks a page to open its socket again (static/js/live.js does for any but 4401 and 4403). Not
# 1011: autobahn, under daphne, lets an application close only with 1000 or 3000-4999, and refused it with an error.
REDIS_AWAY = 4503
SOCKETS = Outage(log, "WebSockets reaching Redis (each is closed for its page to open it again)")


class PanelConsumer(AsyncJsonWebsocketConsumer):
    """A socket whose channel layer fails (Redis restarting, or away) is closed with REDIS_AWAY, or its handshake
    refused, for its page to open it again; the log says so once per outage, with a count when Redis is back,
    where daphne wrote a traceback per open socket and per refused handshake."""

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        except REDIS_DOWN as exc:
            SOCKETS.failed(exc)
            with contextlib.suppress(Exception):  # the browser may have gone already
                await send({"type": "websocket.close", "code": REDIS_AWAY})

    async def accept(self, subprotocol=None, headers=None) -> None:
        await super().accept(subprotocol, headers)
        SOCKETS.over()  # every socket joins its group first: Redis answered


class StatusConsumer(PanelConsumer):
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


class AdminGroupConsumer(PanelConsumer):
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
