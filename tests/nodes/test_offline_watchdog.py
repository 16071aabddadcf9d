"""A laptop that went quiet is told to pages by the collector's watchdog, without waiting for a round: a round
writes rows, and on a busy SQLite a write waits seconds behind another process's (CI once saw "offline" 6.5 s
after the unplug, against the 5 s promised). The samples are played here, as in
test_metrics_through_a_redis_restart.py; tests/nodes/test_live_metrics.py unplugs a real laptop."""

import asyncio
import time

from asgiref.sync import async_to_sync
from channels.layers import DEFAULT_CHANNEL_LAYER, channel_layers

from nodes.metrics import collector
from nodes.models import Node, NodeStatus


def states_heard(group: str, within: float) -> list[dict]:
    """The laptop states sent to `group` within `within` seconds. Each listen has a layer of its own: the shared
    one keeps a lock per channel bound to the event loop that first took it, and async_to_sync gives each call a
    loop of its own (CI: "Lock ... is bound to a different event loop" on the second listen)."""
    async def listen() -> list[dict]:
        layer = channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)
        channel = await layer.new_channel()
        await layer.group_add(group, channel)
        heard, deadline = [], time.monotonic() + within
        try:
            while (left := deadline - time.monotonic()) > 0:
                try:
                    message = await asyncio.wait_for(layer.receive(channel), left)
                except TimeoutError:
                    break
                if message["type"] == "dashboard.state":
                    heard.append(message["payload"])
        finally:
            await layer.group_discard(group, channel)
            await layer.close_pools()
        return heard

    return async_to_sync(listen)()


def test_a_quiet_laptop_is_said_offline_by_the_watchdog_before_any_round_and_once(db):
    node = Node.objects.create(name="quiet-1", host="192.0.2.7", username="u", status=NodeStatus.READY)
    watching = collector.Collector(interval=1.0)
    stream = collector.NodeStream(node, watching.publisher, 1.0)  # its thread never starts: no SSH here
    stream.last_sample = stream.started = time.monotonic() - collector.OFFLINE_AFTER_S + 1.0  # 2.5 s ago
    try:
        watching.online[node.pk] = True
        watching.streams[node.pk] = stream
        heard = states_heard("dashboard", 4.0)  # no round runs meanwhile, as when one waits on the database
        assert [(s["node"], s["state"]) for s in heard] == [(node.pk, "offline")], heard

        watching.watch(node, stream)  # the round that follows writes the row, and says nothing twice
        assert Node.objects.get(pk=node.pk).status == NodeStatus.OFFLINE
        assert states_heard("dashboard", 1.0) == []
    finally:
        watching.close()
