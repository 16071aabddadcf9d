"""A form's address opened as a page (a login that led back to it, a reload, a bookmark) goes to the page the
form is on, where a browser used to show its own "HTTP ERROR 405" for the empty answer."""

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import Resolver404, resolve

NOT_PAGES = ("/api/", "/v1/", "/admin/")  # scripts get the 405 and its Allow header as they are


class StaleFormMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code != 405 or request.method != "GET" or request.path.startswith(NOT_PAGES):
            return response
        page = page_above(request.path)
        if page is None:
            return response
        messages.info(request, "That address takes a form sent from its page, so nothing was done. "
                               "Here is the page: send the form again from here if you still want to.")
        return redirect(page)


def page_above(path: str) -> str | None:
    """The nearest address above `path` that is a page: /chat/1/rename/ → /chat/1/, /users/5/role/ → /users/."""
    parts = path.strip("/").split("/")
    for end in range(len(parts) - 1, -1, -1):
        candidate = "/" + "".join(f"{part}/" for part in parts[:end])
        try:
            resolve(candidate)
        except Resolver404:
            continue
        return candidate
    return None
