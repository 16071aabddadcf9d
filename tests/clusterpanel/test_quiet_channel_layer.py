"""A listener on the channel layer waits as long as it takes: a group quiet for longer than channels_redis's
5 s wait and redis-py's default 5 s read timeout still delivers its next message (the panel's real Redis)."""

import asyncio

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

QUIET_S = 12


def test_it_delivers_a_message_that_comes_after_a_long_silence():
    async def scenario():
        layer = get_channel_layer()
        channel = await layer.new_channel()
        await layer.group_add("quiet-test", channel)
        try:
            async def later():
                await asyncio.sleep(QUIET_S)
                await layer.group_send("quiet-test", {"type": "late.news", "n": 1})

            sender = asyncio.ensure_future(later())
            message = await asyncio.wait_for(layer.receive(channel), timeout=QUIET_S + 10)
            await sender
            return message
        finally:
            await layer.group_discard("quiet-test", channel)

    assert async_to_sync(scenario)() == {"type": "late.news", "n": 1}
