"""Destructive actions ask first: a GET shows what the action will end, the POST does it.

One page for all of them (templates/confirm.html), so every "remove" and "stop" reads the same way and
works without JavaScript.
"""

from collections.abc import Callable

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render


def ask(request: HttpRequest, question: str, consequences: list[str], verb: str, back: str,
        options: list[tuple[str, str]] = (), carry: list[tuple[str, str]] = ()) -> HttpResponse:
    """`options`: checkboxes (name, label); `carry`: fields the POST needs again (name, value), plus
    `confirmed=1`, for an action whose first POST only asks."""
    return render(request, "confirm.html", {"question": question, "consequences": consequences, "verb": verb,
                                            "back": back, "options": options, "carry": carry})


def refuse(request: HttpRequest, question: str, why: str, back: str) -> HttpResponse:
    """The action cannot be done now: say why, change nothing (409: the request was fine, the state is not)."""
    return render(request, "confirm.html", {"question": question, "refusal": why, "back": back}, status=409)


def ask_then_do(request: HttpRequest, *, question: str, back: str, verb: str, check: Callable[[], list[str]],
                act: Callable[[], None], refusals: tuple[type[Exception], ...], done: str, then: str) -> HttpResponse:
    """The usual destructive view: GET shows what `act` will end (`check()`, which raises one of `refusals`
    when it cannot be done now); POST checks and acts (the service checks again under its lock), says `done`
    and goes to `then`."""
    try:
        consequences = check()
        if request.method == "POST":
            act()
    except refusals as exc:
        return refuse(request, question, str(exc), back)
    if request.method != "POST":
        return ask(request, question, consequences, verb, back)
    messages.success(request, done)
    return redirect(then)
