"""`{{ bytes|size }}`: a size as the whole panel writes it (clusterpanel/units.py)."""

from django import template

from clusterpanel import units

register = template.Library()


@register.filter
def size(count) -> str:
    return units.size(count)
