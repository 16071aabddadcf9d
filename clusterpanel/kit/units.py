"""How the panel writes sizes: memory and files alike in binary units named as such (KiB, MiB, GiB, TiB),
one decimal from GiB up, so one laptop's RAM reads the same on every page. Rates stay decimal (MB/s), as links
are sold. static/js/units.js writes them the same way in the browser."""

import re

UNITS = ["bytes", "KiB", "MiB", "GiB", "TiB"]


def size(count: float | None) -> str:
    """23.6 GiB, 512 MiB, 40 KiB, 0 bytes."""
    value, unit = float(count or 0), 0
    while abs(value) >= 1024 and unit < len(UNITS) - 1:
        value, unit = value / 1024, unit + 1
    if unit == 0:
        return f"{value:.0f} bytes" if value != 1 else "1 byte"
    return f"{value:.1f} {UNITS[unit]}" if unit >= 3 else f"{value:.0f} {UNITS[unit]}"


def rate(gb_s: float | None) -> str:
    """A memory speed measured in GB/s, as a person reads it: "21.4 GB/s", "350 MB/s", "43.7 kB/s" (three
    significant digits; a lavapipe device on a busy core measured 4.37e-05 GB/s)."""
    value = float(gb_s or 0)
    for unit, factor in (("GB/s", 1), ("MB/s", 1e-3), ("kB/s", 1e-6)):
        if value >= factor or unit == "kB/s":
            return f"{value / factor:.3g} {unit}"
    return ""  # not reached


# What a person may write after a number: binary and decimal units as named, a bare letter read as binary
# (as `df -h` and `du -h` print them).
FACTORS = {"b": 1, "byte": 1, "bytes": 1,
           "k": 2**10, "kib": 2**10, "kb": 10**3, "m": 2**20, "mib": 2**20, "mb": 10**6,
           "g": 2**30, "gib": 2**30, "gb": 10**9, "t": 2**40, "tib": 2**40, "tb": 10**12}
SIZE = re.compile(r"\s*([0-9]{1,15}(?:\.[0-9]{1,15})?)\s*([A-Za-z]+)\s*")


def parse_size(text: str, least: int = 2**20, most: int = 2**50) -> int:
    """"40 GiB", "500MB", "1.5 T" in bytes; ValueError saying what is wrong in words (no unit, not a size,
    0 or negative, below `least` or above `most`)."""
    found = SIZE.fullmatch(text or "")
    if found is None:
        if re.fullmatch(r"\s*-.*", text or ""):
            raise ValueError("A size cannot be negative.")
        if re.fullmatch(r"\s*[0-9.]+\s*", text or ""):
            raise ValueError(f"Say the unit too, e.g. {text.strip()} GiB.")
        raise ValueError(f"{text.strip()[:40]!r} is not a size: write a number and a unit, e.g. 40 GiB or 500 MB.")
    number, unit = float(found.group(1)), found.group(2).lower()
    if unit not in FACTORS:
        raise ValueError(f"{found.group(2)} is not a unit of size: use bytes, KiB, MiB, GiB, TiB (or KB, MB, GB, TB).")
    value = round(number * FACTORS[unit])
    if value <= 0:
        raise ValueError("A size must be more than 0.")
    if value < least:
        raise ValueError(f"At least {size(least)}, please: a smaller cap would keep nothing worth keeping.")
    if value > most:
        raise ValueError(f"At most {size(most)}: no laptop's disk is larger.")
    return value


def exact_size(count: int) -> str:
    """A byte count in the largest binary unit that writes it whole, so that reading it back gives it again."""
    for unit, factor in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count and count % factor == 0:
            return f"{count // factor} {unit}"
    return f"{count} bytes"
