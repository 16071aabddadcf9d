"""Every WebSocket route of the panel, gathered from the apps."""

from django.urls import path

from clusterpanel.kit.consumers import StatusConsumer
from jobs.batches.consumers import BatchConsumer
from jobs.chat.consumers import JobConsumer
from models_app.pages.consumers import DeploymentConsumer, ModelConsumer
from nodes.pages.consumers import DashboardConsumer, NodeConsumer

websocket_urlpatterns = [
    path("ws/status/", StatusConsumer.as_asgi()),
    path("ws/nodes/<int:node_id>/", NodeConsumer.as_asgi()),
    path("ws/dashboard/", DashboardConsumer.as_asgi()),
    path("ws/deployments/<int:pk>/", DeploymentConsumer.as_asgi()),
    path("ws/models/<int:pk>/", ModelConsumer.as_asgi()),
    path("ws/jobs/<int:pk>/", JobConsumer.as_asgi()),
    path("ws/batches/<int:pk>/", BatchConsumer.as_asgi()),
]
