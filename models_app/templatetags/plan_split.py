"""`{{ words|unbroken_ranges }}`: "layers 9–10 and the output layer" may wrap between words, never inside
"9–10" (a line may break after a dash, which on a phone left "layers 9–" above "10")."""

import re

from django import template
from django.utils.html import escape
from django.utils.safestring import mark_safe

register = template.Library()
RANGE = re.compile(r"(\d+–\d+)")


@register.filter
def unbroken_ranges(words: str) -> str:
    return mark_safe(RANGE.sub(r'<span class="range">\1</span>', escape(words)))  # noqa: S308 (escaped first)
