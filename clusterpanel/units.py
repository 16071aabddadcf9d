"""How the panel writes sizes: memory and files alike in binary units named as such (KiB, MiB, GiB, TiB),
one decimal from GiB up, so one laptop's RAM reads the same on every page. Rates stay decimal (MB/s), as links
are sold. static/js/units.js writes them the same way in the browser."""

UNITS = ["bytes", "KiB", "MiB", "GiB", "TiB"]


def size(count: float | None) -> str:
    """23.6 GiB, 512 MiB, 40 KiB, 0 bytes."""
    value, unit = float(count or 0), 0
    while abs(value) >= 1024 and unit < len(UNITS) - 1:
        value, unit = value / 1024, unit + 1
    if unit == 0:
        return f"{value:.0f} bytes" if value != 1 else "1 byte"
    return f"{value:.1f} {UNITS[unit]}" if unit >= 3 else f"{value:.0f} {UNITS[unit]}"
