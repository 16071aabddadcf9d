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
        said_down(group, exc)
    else:
        said_up()


class Reach:
    """Whether this process has reached Redis yet, and whether it is down now: the log says an outage once,
    and not at all while Redis is still starting beside the panel (`make run` starts them together)."""

    reached = False
    down = False


def said_down(group: str, exc: Exception) -> None:
    if Reach.reached and not Reach.down:
        Reach.down = True
        log.warning("could not tell browsers in %s: %s (said once until Redis answers again)", group, exc)
    else:
        log.debug("could not tell browsers in %s: %s", group, exc)


def said_up() -> None:
    if Reach.down:
        log.info("telling browsers works again")
    Reach.reached, Reach.down = True, False

