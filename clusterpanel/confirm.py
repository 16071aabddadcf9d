"""Destructive actions ask first: a GET shows what the action will end, the POST does it.

One page for all of them (templates/confirm.html), so every "remove" and "stop" reads the same way and
works without JavaScript.
"""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def ask(request: HttpRequest, question: str, consequences: list[str], verb: str, back: str,
        options: list[tuple[str, str]] = (), carry: list[tuple[str, str]] = ()) -> HttpResponse:
    """`options`: checkboxes (name, label); `carry`: fields the POST needs again (name, value), plus
    `confirmed=1`, for an action whose first POST only asks."""
    return render(request, "confirm.html", {"question": question, "consequences": consequences, "verb": verb,
                                            "back": back, "options": options, "carry": carry})


def refuse(request: HttpRequest, question: str, why: str, back: str) -> HttpResponse:
    """The action cannot be done now: say why, change nothing (409: the request was fine, the state is not)."""
    return render(request, "confirm.html", {"question": question, "refusal": why, "back": back}, status=409)
