"""Every WebSocket route of the panel, gathered from the apps."""

from django.urls import path

from clusterpanel.consumers import StatusConsumer

websocket_urlpatterns = [
    path("ws/status/", StatusConsumer.as_asgi()),
]
