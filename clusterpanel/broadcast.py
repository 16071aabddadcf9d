"""The one door from the panel's workers to browsers (the channel layer)."""

from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer


def broadcast(group: str, event_type: str, payload: dict[str, Any]) -> None:
    """Send `payload` to every browser in `group`; `event_type` like `job.token`."""
    layer = get_channel_layer()
    async_to_sync(layer.group_send)(group, {"type": event_type, "payload": payload})
