"""What makes a laptop fail as a server: its battery, a CPU held back (heat, a cgroup limit) and a Wi-Fi link.

Pure readings of the raw values nodes/probing/probe.sh and the sampler's script print, and the short flags pages show.
A value the laptop reports that makes no sense (a capacity of "abc" or 250) is an unknown with a note, never a
guess: a wrong "on battery 250%" would be worse than none.
"""

from dataclasses import dataclass

SLOW_CLOCK = 0.7  # a busy CPU below this share of its top clock is held back (heat, a power limit)
BUSY_PERCENT = 50  # an idle CPU clocks down by design; only a busy one's clock says anything
THROTTLED_FLAG = 0.2  # share of time a cgroup held the laptop's CPU back, worth a flag
STATES = {"discharging": "on battery", "charging": "charging", "full": "full", "not charging": "not charging"}


@dataclass(frozen=True)
class Battery:
    state: str | None  # "on battery", "charging", "full", "not charging", "on AC"; None: unknown
    percent: int | None
    note: str = ""  # why a reading is unknown, in words

    def as_facts(self) -> dict:
        return {"battery_state": self.state, "battery_percent": self.percent, "battery_note": self.note}


def percent_from(raw: str) -> tuple[int | None, str]:
    """A battery's capacity file as a percent, or None and why."""
    text = raw.strip()
    if not text:
        return None, "the battery does not report its charge"
    if not (text.isascii() and text.lstrip("-").isdecimal()) or not 0 <= int(text) <= 100:
        return None, f"the battery's charge reads {text[:20]!r}, not a percent from 0 to 100"
    return int(text), ""


def battery(capacity: str, status: str, on_ac: str) -> Battery:
    """A laptop's battery from sysfs' capacity, status and the mains supply's online ("" where absent).
    A status that is missing or "Unknown" leaves the plug to tell; when neither tells, the state is unknown."""
    percent, note = percent_from(capacity)
    state = STATES.get(status.strip().lower())
    if state is None:
        state = {"0": "on battery", "1": "on AC"}.get(on_ac.strip())
        if state is None:
            said = (f"the battery's state reads {status.strip()[:20]!r}, neither charging nor discharging"
                    if status.strip() else "the battery does not say whether it charges")
            note = "; ".join(filter(None, [note, f"{said}, and no plug is reported"]))
    return Battery(state, percent, note)


def on_battery(facts: dict) -> bool:
    return facts.get("battery_state") == "on battery"


def clock_share(now_khz: int | None, max_khz: int | None) -> float | None:
    return round(now_khz / max_khz, 2) if now_khz and max_khz and 0 < now_khz <= 2 * max_khz else None


def throttled_share(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """Share of the time between two readings of (time, throttled time), in nanoseconds, that a cgroup held the
    CPU back (its time summed over its cores: a laptop's group on one core reads exactly; capped at all)."""
    if not before or not after or after[0] <= before[0]:
        return None
    return round(min(max(after[1] - before[1], 0) / (after[0] - before[0]), 1.0), 2)


def periods_share(stat: str) -> float | None:
    """From a probe's "<periods> <throttled periods>": the share of the cgroup's busy periods it was held back."""
    parts = stat.split()
    if len(parts) < 2 or not all(part.isascii() and part.isdecimal() for part in parts[:2]) or int(parts[0]) == 0:
        return None
    return round(min(int(parts[1]) / int(parts[0]), 1.0), 2)


def quota_cores(raw: str) -> float | None:
    """"<quota µs> <period µs>" (v1) or "<quota|max> <period>" (v2): the cores a cgroup allows, None unlimited."""
    parts = raw.split()
    if len(parts) != 2 or not all(part.isascii() and part.isdecimal() for part in parts) or int(parts[1]) == 0:
        return None
    return round(int(parts[0]) / int(parts[1]), 2)


def link_kind(wireless: str, nic: str) -> str | None:
    """"wifi" or "wired" from the probe's wireless=1/0 (sysfs, or a wl* name); None when no link was found."""
    if not nic:
        return None
    return {"1": "wifi", "0": "wired"}.get(wireless.strip())


def ghz(khz: int) -> str:
    return f"{khz / 1e6:.1f}"


def battery_flag(facts: dict, sample: dict | None) -> dict | None:
    live = (sample or {}).get("battery") or {}
    state = live.get("state", facts.get("battery_state"))
    percent = live.get("percent", facts.get("battery_percent"))
    if state != "on battery":
        return None
    text = f"on battery {percent}%" if percent is not None else "on battery"
    return {"kind": "battery", "text": text,
            "why": "a laptop on battery may sleep or slow down as it drains; plug it in while it serves"}


def cpu_flag(facts: dict, sample: dict | None) -> dict | None:
    sample = sample or {}
    why = "its CPU runs slower than when its speed was measured, so its layers take longer"
    throttled = sample.get("throttled")
    if throttled is not None and throttled >= THROTTLED_FLAG:
        return {"kind": "throttled", "text": f"throttled {throttled:.0%} of the time", "why": why}
    now, top = sample.get("cpu_khz"), sample.get("cpu_khz_max") or facts.get("cpu_khz_max")
    share = clock_share(now, top)
    if share is not None and share < SLOW_CLOCK and (sample.get("cpu") or 0) >= BUSY_PERCENT:
        return {"kind": "throttled", "text": f"CPU at {ghz(now)} of {ghz(top)} GHz", "why": why}
    limit = facts.get("cpu_speed_limit")  # a Mac's: pmset's record of the speed macOS holds its CPU to
    if limit is not None and limit < 100:
        return {"kind": "throttled", "text": f"CPU held to {limit}% of its speed by macOS", "why": why}
    cores = facts.get("cpu_quota_cores")
    if cores is not None and (facts.get("cpu_throttled_share") or 0) >= THROTTLED_FLAG:
        return {"kind": "throttled", "text": f"held to {cores:g} cores, throttled in "
                f"{facts['cpu_throttled_share']:.0%} of its busy periods", "why": why}
    return None


def wifi_flag(facts: dict, rtt_ms: float | None = None) -> dict | None:
    if facts.get("link_kind") != "wifi":
        return None
    rtt = rtt_ms if rtt_ms is not None else facts.get("rtt_ms")
    text = f"Wi-Fi, {rtt:.1f} ms round trip" if rtt is not None else "Wi-Fi"
    return {"kind": "wifi", "text": text,
            "why": "a wireless link's delay varies and it drops more often than a cable; plans give it the "
                   "least work"}


def flags(facts: dict | None, sample: dict | None = None, rtt_ms: float | None = None) -> list[dict]:
    """What to warn about a laptop as a server: on battery, throttling, on Wi-Fi. `sample`: its newest 1 Hz
    sample, which knows better than the probe; `rtt_ms`: a measured round trip (a network check's)."""
    facts = facts or {}
    found = [battery_flag(facts, sample), cpu_flag(facts, sample), wifi_flag(facts, rtt_ms)]
    return [flag for flag in found if flag]
