"""A listener on the channel layer waits as long as it takes: a group quiet for several times the layer's wait
for a message (CHANNEL_WAIT_S) and Redis' read timeout (REDIS_READ_TIMEOUT_S) still delivers its next message
(the panel's real Redis). The layer is the panel's own, with both made short so the silence lasts seconds; the
settings refuse a read timeout that does not outlast the wait."""

import asyncio
import os
import subprocess
import sys

from asgiref.sync import async_to_sync
from django.conf import settings

from clusterpanel.kit.channel_layer import ChannelLayer

WAIT_S, READ_TIMEOUT_S = 1, 2
QUIET_S = 3 * READ_TIMEOUT_S


def short_layer() -> ChannelLayer:
    config = settings.CHANNEL_LAYERS["default"]["CONFIG"]
    hosts = [{**host, "socket_timeout": READ_TIMEOUT_S} for host in config["hosts"]]
    return ChannelLayer(**{**config, "hosts": hosts, "wait_s": WAIT_S})


def test_it_delivers_a_message_that_comes_after_a_long_silence():
    async def scenario():
        layer = short_layer()
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
            await layer.close_pools()

    assert async_to_sync(scenario)() == {"type": "late.news", "n": 1}


def test_the_panels_layer_waits_as_the_settings_say():
    assert settings.CHANNEL_LAYERS["default"]["BACKEND"] == "clusterpanel.kit.channel_layer.ChannelLayer"
    assert short_layer().brpop_timeout == WAIT_S
    assert ChannelLayer(**settings.CHANNEL_LAYERS["default"]["CONFIG"]).brpop_timeout == settings.CHANNEL_WAIT_S


def test_a_read_timeout_that_does_not_outlast_the_wait_is_refused():
    env = {**os.environ, "CHANNEL_WAIT_S": "3", "REDIS_READ_TIMEOUT_S": "3"}
    done = subprocess.run([sys.executable, "-c", "import django; django.setup()"], env=env, capture_output=True,
                          text=True, cwd=settings.BASE_DIR)
    assert done.returncode != 0
    assert "REDIS_READ_TIMEOUT_S must be more than CHANNEL_WAIT_S (3 s" in done.stderr
