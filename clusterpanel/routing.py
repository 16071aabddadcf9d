"""Every WebSocket route of the panel, gathered from the apps."""

from clusterpanel.consumers import StatusConsumer
from django.urls import path

websocket_urlpatterns = [
    path("ws/status/", StatusConsumer.as_asgi()),
]
