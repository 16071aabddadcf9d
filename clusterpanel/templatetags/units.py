"""`{{ bytes|size }}`, `{{ gb_s|rate }}`, `{{ khz|ghz }}`, `{{ share|percent }}`: figures as the whole panel
writes them."""

from django import template

from clusterpanel.kit import units

register = template.Library()


@register.filter
def size(count) -> str:
    return units.size(count)


@register.filter
def rate(gb_s) -> str:
    return units.rate(gb_s)


@register.filter
def ghz(khz) -> str:
    """A clock in kHz, as sysfs gives it, in GHz: 1200000 → "1.2"."""
    return f"{khz / 1e6:.1f}" if isinstance(khz, int | float) else ""


@register.filter
def percent(share) -> str:
    """A share from 0 to 1 as a whole percent: 0.6 → "60%"."""
    return f"{share:.0%}" if isinstance(share, int | float) else ""
