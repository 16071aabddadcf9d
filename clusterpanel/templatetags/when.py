"""`{{ moment|ago }}`: "5 minutes ago", with the exact time on hover and for screen readers' <time>."""

from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.timesince import timesince

register = template.Library()


@register.filter
def ago(moment, never: str = "never"):
    if not moment:
        return never
    exact = timezone.localtime(moment).strftime("%Y-%m-%d %H:%M:%S %Z")
    return format_html('<time datetime="{}" title="{}">{} ago</time>', moment.isoformat(), exact, timesince(moment))
