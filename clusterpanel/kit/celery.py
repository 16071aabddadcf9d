import os

import redis
from celery import Celery
from kombu.exceptions import OperationalError
from redis.exceptions import RedisError

from clusterpanel.kit.worker_faults import install as install_worker_faults

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clusterpanel.settings")

app = Celery("clusterpanel")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
install_worker_faults()


def ping(destination: list[str] | None = None, timeout: float = 1.0, on: Celery = app) -> list[dict]:
    """The workers' replies to a ping within `timeout`. Each broker connection the pool kept from before a Redis
    restart fails its first use ("Connection closed by server") though Redis is back, and is then dropped: while
    Redis answers, the ping is asked again until a new connection carries it. A broker that is down raises."""
    for _ in range(on.conf.broker_pool_limit or 10):
        try:
            return on.control.ping(destination=destination, timeout=timeout) or []
        except (OperationalError, RedisError, OSError):
            if not answers(on.conf.broker_url):
                raise
    return on.control.ping(destination=destination, timeout=timeout) or []


def answers(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2).ping())
    except (RedisError, OSError):
        return False
