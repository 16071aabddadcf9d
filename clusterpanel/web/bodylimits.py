"""How large a request body the panel takes, and the answer to one that is larger (clusterpanel/web/webserver.py).

The web server decides before it reads the body, so it knows only the headers: whether a session cookie or a
bearer token is there (not whether it is valid, which takes the database) and where the request goes.
Without either, a caller can log in and no more (BODY_MAX_ANONYMOUS_BYTES). With one, a JSON body or a form
(DATA_UPLOAD_MAX_MEMORY_SIZE, which Django applies to them too), and on their own routes a model upload's chunk
and a batch file with its form.
"""

import json
from collections.abc import Callable

from django.conf import settings

from clusterpanel.kit import units

# What a multipart form adds around a batch file: boundaries, part headers, the CSRF token, the deployment.
FORM_ROOM = 64 << 10

JSON_ERRORS = ("/api/",)  # {"error": sentence, "field": null}, as the API answers (clusterpanel/kit/apikit.py)
OPENAI_ERRORS = ("/v1/",)  # OpenAI's error object, as docs/api.md shows


def route_limits() -> dict[str, int]:
    """URL name → the largest body its view takes, where that is more than a JSON body."""
    batch_form = settings.BATCH_MAX_BYTES + FORM_ROOM  # the page's form, the API's and OpenAI's Files upload
    return {"api:upload": settings.UPLOAD_CHUNK_BYTES, "batches:list": batch_form, "api:upload_batch": batch_form,
            "openai-files": batch_form}


def limit_for(credentialed: bool, route: Callable[[], str | None]) -> int:
    """The most bytes of body a caller may send; `route()` names the view the request goes to."""
    if not credentialed:
        return settings.BODY_MAX_ANONYMOUS_BYTES
    general = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return max(general, route_limits().get(route(), general))


def largest() -> int:
    """The largest body any caller may send: what a proxy in front of the panel must let through."""
    return max(settings.DATA_UPLOAD_MAX_MEMORY_SIZE, *route_limits().values())


def explanation(limit: int, length: int | None, credentialed: bool) -> str:
    size = f"is {units.size(length)}" if length is not None else f"is more than {units.size(limit)}"
    if not credentialed:
        return (f"The request body {size}; without logging in or an API token the panel takes at most "
                f"{units.size(limit)}.")
    return f"The request body {size}; the panel takes at most {units.size(limit)} here."


def refusal(path: bytes, limit: int, length: int | None, credentialed: bool) -> bytes:
    """A whole HTTP 413 response, JSON in the shape of the API the path belongs to, else plain text."""
    message = explanation(limit, length, credentialed)
    where = path.decode("ascii", "replace")
    if where.startswith(OPENAI_ERRORS):
        kind, body = "application/json", json.dumps({"error": {
            "message": message, "type": "invalid_request_error", "param": None, "code": "request_too_large"}})
    elif where.startswith(JSON_ERRORS):
        kind, body = "application/json", json.dumps({"error": message, "field": None})
    else:
        kind, body = "text/plain; charset=utf-8", message + "\n"
    content = body.encode()
    head = (f"HTTP/1.1 413 Content Too Large\r\nContent-Type: {kind}\r\nContent-Length: {len(content)}\r\n"
            "Connection: close\r\n\r\n")
    return head.encode() + content
