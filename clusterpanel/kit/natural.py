"""Names in the order people count them: hid5-2 before hid5-10, laptop9 before laptop10.

Labs number their laptops, and a plain text sort puts hid5-10 between hid5-1 and hid5-2, which at 39 laptops
scatters a shelf across a table. static/js/natural.js sorts the same way in the browser."""

import re

_DIGITS = re.compile(r"(\d+)")


def natural_key(name: str) -> tuple:
    """Sort key: runs of digits compare as numbers, the rest as case-folded text ("Lab-2" < "lab-10")."""
    parts = _DIGITS.split(name or "")
    folded = tuple((0, int(part)) if i % 2 else (1, part.casefold()) for i, part in enumerate(parts))
    return folded, name or ""  # the name itself only breaks ties ("lab-02" and "lab-2", "A" and "a")


def natural_sorted(items, key=lambda item: item):
    """`items` sorted by `natural_key(key(item))`: `key` picks the name (`lambda node: node.name`)."""
    return sorted(items, key=lambda item: natural_key(key(item)))
