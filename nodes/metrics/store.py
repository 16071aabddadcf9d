"""Where samples live: the last hour per laptop in Redis (1 s), older history per minute in the database."""

import json
import time
from datetime import UTC, datetime, timedelta
from functools import cache
from statistics import fmean

import redis
from django.conf import settings
from django.utils import timezone
from redis.backoff import NoBackoff
from redis.retry import Retry

from nodes.models import MetricMinute, Node

WINDOW_S = 3600
HISTORY_DAYS = 7
AVERAGED = ("cpu", "ram_used", "ram_available", "swap_used", "rx", "tx")


@cache
def store() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL)


def key(node_id: int) -> str:
    return f"clusterpanel:metrics:{node_id}"


@cache
def writer() -> redis.Redis:
    """The collector's: a Redis that is away costs a sample, never seconds of a laptop's stream (the default
    client retries for seconds, long enough for the laptop to look offline). One retry at once, on a new
    connection, for the pooled one a Redis restart left stale."""
    return redis.Redis.from_url(settings.REDIS_URL, retry=Retry(NoBackoff(), 1), socket_connect_timeout=1,
                                socket_timeout=2)


def append(node_id: int, sample: dict) -> None:
    pipe = writer().pipeline()
    pipe.rpush(key(node_id), json.dumps(sample))
    pipe.ltrim(key(node_id), -WINDOW_S, -1)
    pipe.execute()


def recent(node_id: int, seconds: int = 600) -> list[dict]:
    """The last `seconds` of samples; none when Redis cannot be reached (pages still render)."""
    try:
        raw = store().lrange(key(node_id), -max(1, min(seconds, WINDOW_S)), -1)
    except redis.RedisError:
        return []
    return [json.loads(item) for item in raw]


def latest(node_ids: list[int]) -> dict[int, dict]:
    """Each laptop's newest sample, in one round trip; none when Redis cannot be reached."""
    try:
        pipe = store().pipeline(transaction=False)
        for node_id in node_ids:
            pipe.lindex(key(node_id), -1)
        found = pipe.execute()
    except redis.RedisError:
        return {}
    return {node_id: json.loads(item) for node_id, item in zip(node_ids, found, strict=True) if item}


def fresh(node_id: int, within_s: float = 60) -> dict | None:
    """The laptop's newest sample if it was taken within `within_s`; None for a laptop gone quiet."""
    sample = latest([node_id]).get(node_id)
    return sample if sample and time.time() - sample.get("t", 0) <= within_s else None


def minutes_from(samples: list[dict], before: float) -> dict[int, list[dict]]:
    """Whole minutes (start, as epoch seconds) of samples taken before `before`."""
    grouped: dict[int, list[dict]] = {}
    for sample in samples:
        if sample["t"] < before:
            grouped.setdefault(int(sample["t"] // 60 * 60), []).append(sample)
    return grouped


def average(samples: list[dict], name: str) -> float | int:
    mean = fmean(sample[name] for sample in samples)
    return round(mean, 1) if name == "cpu" else round(mean)


def downsample(node: Node) -> int:
    """Average every finished minute in the window not yet in the database; returns rows written."""
    now = timezone.now().timestamp()
    latest = node.metric_minutes.order_by("-minute").values_list("minute", flat=True).first()
    done_until = latest.timestamp() + 60 if latest else 0
    rows = [
        MetricMinute(node=node, minute=datetime.fromtimestamp(start, UTC), samples=len(group),
                     **{name: average(group, name) for name in AVERAGED})
        for start, group in minutes_from(recent(node.pk, WINDOW_S), now // 60 * 60).items()
        if start >= done_until
    ]
    MetricMinute.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


def prune() -> int:
    cutoff = timezone.now() - timedelta(days=HISTORY_DAYS)
    return MetricMinute.objects.filter(minute__lt=cutoff).delete()[0]
