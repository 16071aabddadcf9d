"""What each deployment's engine is doing: its slots in use, its tokens/s, and the jobs waiting for it.

The engine keeps `deployment.engine` up to date ("slots", "busy", "jobs", "tokens_per_s", "draft", "at"; see
jobs/engine/child.py set_engine). Pages read that dict through `engine_load`, which never fails on an old or
partial one: a deployment deployed before slots existed, or whose engine has not loaded, shows nothing.
"""

import math
import time

# The engine refreshes tokens/s at least every 2 s while anything generates; a figure older than this means
# nothing has generated since.
STALE_S = 5.0


def engine_load(engine: dict | None, now: float | None = None) -> dict | None:
    """The slots and tokens/s to show for an engine's dict, or None when it says nothing about slots."""
    engine = engine if isinstance(engine, dict) else {}
    slots, busy = whole(engine.get("slots")), whole(engine.get("busy"))
    if not slots or engine.get("state", "ready") != "ready":
        return None  # no engine of the slots era, or one not (or no longer) serving: its counts are old
    busy = min(busy or 0, slots)
    jobs = [job for job in engine.get("jobs") or [] if whole(job)] if isinstance(engine.get("jobs"), list) else []
    now = time.time() if now is None else now
    return {"slots": slots, "busy": busy, "free": slots - busy, "boxes": [n < busy for n in range(slots)],
            "jobs": jobs, "tokens_per_s": fresh_rate(engine, now), "draft": drafting(engine, now)}


def drafting(engine: dict, now: float) -> dict | None:
    """Speculative decoding over the engine's last report, while it is fresh: the share of drafted tokens kept
    and the tokens made per step through the model."""
    draft = engine.get("draft")
    if not isinstance(draft, dict) or not number(engine.get("at")) or now - engine["at"] > STALE_S:
        return None
    kept, per_trip = draft.get("kept"), draft.get("per_trip")
    if not number(kept) or not number(per_trip):
        return None
    return {"kept_percent": round(100 * kept), "per_trip": per_trip}


def fresh_rate(engine: dict, now: float) -> float:
    rate, at = engine.get("tokens_per_s"), engine.get("at")
    if not number(rate) or not number(at) or now - at > STALE_S:
        return 0.0
    return max(float(rate), 0.0)


def whole(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)

