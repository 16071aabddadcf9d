"""Requests per minute: a sliding window of the last minute's requests per person and per token, in Redis.

Each window is a sorted set of request times. One Lua script checks every window a request falls under and
records the request in all of them only if none is full, so web workers never race past a limit, a refused
request uses up nothing, and the clock is Redis's own (the workers' may differ). When a window is full, the
request may come again once its oldest request in the window leaves it: that wait is Retry-After.
"""

import logging
import math
import secrets
import time
from dataclasses import dataclass

import redis

from clusterpanel.kit.outage import Outage
from jobs.queue import stream

log = logging.getLogger(__name__)
WINDOW_S = 60
AWAY_S = 5  # after Redis failed a check, how long requests pass without trying it again
UNCHECKED = Outage(log, "the requests-per-minute check on Redis (requests pass unchecked meanwhile)")

# KEYS: the windows; ARGV: the window's seconds, this request's member, then each window's limit.
# Returns {0} when recorded, else {the full window's index (1-based), seconds until it has room, as text}.
SCRIPT = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) + tonumber(now_parts[2]) / 1000000
local span = tonumber(ARGV[1])
local full, wait = 0, 0
for i, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - span)
  local limit = tonumber(ARGV[i + 2])
  local count = redis.call('ZCARD', key)
  if count >= limit then
    local leaving = redis.call('ZRANGE', key, count - limit, count - limit, 'WITHSCORES')
    local until_room = tonumber(leaving[2]) + span - now
    if until_room > wait then full, wait = i, until_room end
  end
end
if full > 0 then return {full, tostring(wait)} end
for i, key in ipairs(KEYS) do
  redis.call('ZADD', key, now, ARGV[2])
  redis.call('EXPIRE', key, math.ceil(span) + 1)
end
return {0}
"""


@dataclass(frozen=True)
class Full:
    """The window that had no room (its index among those asked) and the whole seconds until it has."""

    index: int
    retry_after: int


class _Client:
    connection: redis.Redis | None = None  # one per process, its pool shared by the web server's threads
    script = None
    away_until = 0.0  # after a failure, requests pass unchecked a few seconds without trying Redis each time


def key(subject: str) -> str:
    """`subject`: "user:<id>" or "token:<id>"."""
    return f"limits:rpm:{subject}"


def take(windows: list[tuple[str, int]]) -> Full | None:
    """Record one request in each (subject, limit) window, or none of them if one is full (which it says). Redis
    away, the request passes: a lab whose Redis restarts should not refuse its people for that (jobs themselves
    wait for Redis elsewhere)."""
    if not windows or time.monotonic() < _Client.away_until:
        return None
    try:
        if _Client.connection is None:
            _Client.connection = stream.hasty_store()
            _Client.script = _Client.connection.register_script(SCRIPT)
        answer = _Client.script(keys=[key(subject) for subject, _ in windows],
                                args=[WINDOW_S, secrets.token_hex(8), *(limit for _, limit in windows)])
    except (redis.RedisError, OSError) as exc:
        UNCHECKED.failed(exc)
        _Client.away_until = time.monotonic() + AWAY_S
        return None
    UNCHECKED.over()
    if int(answer[0]) == 0:
        return None
    return Full(int(answer[0]) - 1, max(1, math.ceil(float(answer[1]))))
