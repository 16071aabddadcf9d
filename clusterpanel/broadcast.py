"""The one door from the panel's workers to browsers (the channel layer)."""

import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from redis.exceptions import RedisError

log = logging.getLogger(__name__)


def broadcast(group: str, event_type: str, payload: dict[str, Any]) -> None:
    """Send `payload` to every browser in `group`; `event_type` like `job.token`.

    Best effort: the record in the database is the truth, and a page that
    missed a message catches up when its socket opens.
    """
    layer = get_channel_layer()
    try:
        async_to_sync(layer.group_send)(group, {"type": event_type, "payload": payload})
    except (OSError, RedisError) as exc:
        log.warning("could not tell browsers in %s: %s", group, exc)

