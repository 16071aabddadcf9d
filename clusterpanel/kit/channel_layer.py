"""channels_redis' layer with its wait for a message as a setting (CHANNEL_WAIT_S) rather than a class constant,
so that tests can make it short and soak a quiet socket past it in seconds instead of minutes."""

from channels_redis.core import RedisChannelLayer


class ChannelLayer(RedisChannelLayer):
    def __init__(self, *args, wait_s: float = RedisChannelLayer.brpop_timeout, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.brpop_timeout = wait_s
