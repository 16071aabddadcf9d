"""`{{ moment|ago }}`: "5 minutes ago" (or "in 3 days" for a moment to come), with the exact time on hover and
for screen readers' <time>."""

from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.timesince import timesince, timeuntil

register = template.Library()


@register.filter
def ago(moment, never: str = "never"):
    if not moment:
        return never
    exact = timezone.localtime(moment).strftime("%Y-%m-%d %H:%M:%S %Z")
    said = f"in {timeuntil(moment)}" if moment > timezone.now() else f"{timesince(moment)} ago"
    return format_html('<time datetime="{}" title="{}">{}</time>', moment.isoformat(), exact, said)
