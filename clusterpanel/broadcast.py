"""The one door from the panel's workers to browsers (the channel layer)."""

import asyncio
import logging
import queue
import threading
from collections.abc import Callable
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


class Publisher:
    """Ordered, non-blocking `broadcast` for a hot loop (the engine sends one message per token).

    Messages go through one background thread with its own event loop, in the
    order they were given; the caller never waits on Redis.
    """

    def __init__(self) -> None:
        self._queue: queue.Queue = queue.Queue()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="publisher", daemon=True)
        self._thread.start()

    def send(self, group: str, event_type: str, payload: dict[str, Any],
             then: Callable[[], None] | None = None) -> None:
        """Queue a message; `then()` runs on the publisher thread just before it is sent."""
        self._queue.put((group, event_type, payload, then))

    def flush(self, timeout: float = 5.0) -> None:
        """Wait until everything queued so far has been sent."""
        done = threading.Event()
        self._queue.put(done)
        done.wait(timeout)

    def _run(self) -> None:
        layer = get_channel_layer()
        while True:
            item = self._queue.get()
            if isinstance(item, threading.Event):
                item.set()
                continue
            group, event_type, payload, then = item
            try:
                if then:
                    then()
                self._loop.run_until_complete(layer.group_send(group, {"type": event_type, "payload": payload}))
            except (OSError, RedisError) as exc:
                log.warning("could not tell browsers in %s: %s", group, exc)
