"""What every router of the REST API (/api/, django-ninja) shares: who is calling, errors in one shape, pages
of lists, and a JSON parser that refuses what would crash the standard one.

Errors are always `{"error": "<sentence>", "field": "<field or null>"}` (docs/api.md): a pydantic validation
error names its field the way a script wrote it (`messages[0].role`, `params.temperature`).
"""

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, Generic, TypeVar

from asgiref.sync import sync_to_async
from django.core.exceptions import RequestDataTooBig
from django.core.serializers.json import DjangoJSONEncoder
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.http.multipartparser import MultiPartParserError
from django.http.request import RawPostDataException
from ninja import Field, NinjaAPI, Schema
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.parser import Parser
from pydantic import ConfigDict

T = TypeVar("T")
MAX_LIMIT, DEFAULT_LIMIT = 200, 50


class ApiError(Exception):
    """Refuse a request: `message` in plain words, the `field` at fault if one is; `retry_after`: the seconds
    until it may come again (a 429's Retry-After)."""

    def __init__(self, message: str, status: int = 400, field: str | None = None,
                 retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status, self.field, self.retry_after = status, field, retry_after


class Input(Schema):
    """A request body: JSON types as declared (no "1" for 1, no "yes" for true), and no field it does not take
    (a typo must not pass silently)."""

    model_config = ConfigDict(extra="forbid", strict=True)


class Error(Schema):
    error: str
    field: str | None = None


def errors(*statuses: int) -> dict[int, type[Error]]:
    """The error answers an operation documents, besides 400 and 401 which every one may give."""
    return {status: Error for status in (400, 401, *statuses)}


class Page(Schema, Generic[T]):
    count: int
    limit: int
    offset: int
    next: str | None
    results: list[T]


class Paging(Schema):
    """`?limit=&offset=`, the same on every list."""

    limit: int = Field(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT)
    offset: int = Field(0, ge=0, le=2**31)


def paged(request: HttpRequest, queryset, describe: Callable[[Any], Any], paging: Paging) -> dict:
    """One page of a queryset: {count, limit, offset, next, results}."""
    limit, offset = paging.limit, paging.offset
    count = queryset.count()
    following = None
    if offset + limit < count:
        query = request.GET.copy()
        query["offset"] = str(offset + limit)
        following = f"{request.path}?{query.urlencode()}"
    return {"count": count, "limit": limit, "offset": offset, "next": following,
            "results": [describe(item) for item in queryset[offset:offset + limit]]}


async def follow(snapshot: Callable[[], dict | None], finished: Callable[[dict], bool],
                 every_s: float = 0.5, keep_alive_s: float = 15.0) -> AsyncIterator[dict]:
    """A long operation's state for Server-Sent Events: sent when it changes (and again every `keep_alive_s`,
    so an idle connection is not cut by a proxy), until `finished` says it ended or it is gone. The state is
    read from the database, the record the pages also draw from: it outlives a Redis restart, and a client
    that reconnects simply gets the current state."""
    last, sent_at = None, 0.0
    while True:
        state = await sync_to_async(snapshot)()
        if state is None:
            return
        if state != last or time.monotonic() - sent_at >= keep_alive_s:
            yield state
            last, sent_at = state, time.monotonic()
        if finished(state):
            return
        await asyncio.sleep(every_s)


def event_stream(states: AsyncIterator[dict]) -> StreamingHttpResponse:
    """Server-Sent Events, one `data: <JSON>` per state, unbuffered by proxies."""
    async def chunks() -> AsyncIterator[str]:
        async for state in states:
            yield f"data: {json.dumps(state, cls=DjangoJSONEncoder)}\n\n"

    response = StreamingHttpResponse(chunks(), content_type="text/event-stream")
    response["Cache-Control"], response["X-Accel-Buffering"] = "no-cache", "no"
    return response


def described_as_events(schema: type[Schema]) -> dict:
    """An operation's OpenAPI entry for an answer of Server-Sent Events carrying `schema` (which another
    operation answers too, so the schema holds it among its components)."""
    return {"responses": {"200": {
        "description": f"Server-Sent Events: `data: <{schema.__name__} as JSON>` whenever it changes (and every "
                       "15 s), until it ends; then the stream closes.",
        "content": {"text/event-stream": {"schema": {  # each event, as OpenAPI 3.2 describes one
            "type": "object", "required": ["data"], "properties": {"data": {
                "type": "string", "contentMediaType": "application/json",
                "contentSchema": {"$ref": f"#/components/schemas/{schema.__name__}"}}}}}}}}}


def existing(pk: int, what: str) -> int:
    """`pk` if a database could hold it (a larger one is a 404 here, not an overflow there)."""
    if not 0 < pk < 2**63:
        raise ApiError(f"There is no {what} {pk}.", 404)
    return pk


def form_refusal(form) -> ApiError:
    """A Django form's first error (the pages' own validation) as the API's refusal."""
    field, messages = next(iter(form.errors.items()))
    return ApiError(" ".join(messages), 400, None if field == "__all__" else field)


class SafeParser(Parser):
    """JSON bodies as objects; nesting past the interpreter's depth, bad bytes, or a body past the limit are one
    refusal each, not a 500. NaN and Infinity are left for the fields to refuse, naming themselves."""

    def parse_body(self, request: HttpRequest) -> dict:
        try:
            return json.loads(request.body)
        except RequestDataTooBig:
            raise ApiError("The request body is too large.", 413) from None
        except (ValueError, RecursionError, RawPostDataException):
            raise ApiError("The request body is not valid JSON.") from None


def field_of(location: tuple) -> str | None:
    """pydantic's error location as a script wrote the field: ("body", "payload", "messages", 0, "role") →
    "messages[0].role", ("query", "limit") → "limit"; None for the body as a whole."""
    parts = list(location)
    if parts[:1] == ["body"]:
        parts = parts[2:]  # the operation's name for its body
    elif parts[:1] in (["query"], ["path"], ["form"], ["file"], ["header"], ["cookie"]):
        parts = parts[1:]
    name = ""
    for part in parts:
        name += f"[{part}]" if isinstance(part, int) else (f".{part}" if name else str(part))
    return name or None


def sentence(error: dict) -> tuple[str, str | None]:
    field = field_of(tuple(error.get("loc", ())))
    message = str(error.get("msg", "is not valid")).removeprefix("Value error, ")
    if error.get("type") == "extra_forbidden":
        message = "is not a field this takes (a typo?)"
    if field is None:
        return ("The request body must be a JSON object." if error.get("type") in ("missing", "dict_type", "model_type",
                                                                                   "model_attributes_type")
                else f"The request body is not valid: {message}."), None
    return f"{field}: {message[:1].lower()}{message[1:]}".rstrip(".") + ".", field


def problem(error: str, status: int = 400, field: str | None = None) -> JsonResponse:
    return JsonResponse({"error": error, "field": field}, status=status)


def no_such_path(request: HttpRequest, rest: str = "") -> JsonResponse:
    """Any path under /api/ that names no operation: a 404 in the API's shape (Django's is a page)."""
    hint = ""
    if not request.path.endswith("/"):
        hint = f" Paths end with a slash: {request.path}/?"
    return problem(f"The API has no {request.path}.{hint} See /api/docs/.", 404)


no_such_path.login_required = False
no_such_path.csrf_exempt = True  # a script's POST to a wrong path is a 404, not a CSRF page


def install_error_handlers(api: NinjaAPI) -> None:
    """Every refusal in the one shape; anything unexpected is still a 500 (and a logged traceback)."""

    @api.exception_handler(ApiError)
    def refused(request: HttpRequest, exc: ApiError) -> HttpResponse:
        answer = problem(str(exc), exc.status, exc.field)
        if exc.retry_after is not None:
            answer["Retry-After"] = str(exc.retry_after)
        return answer

    @api.exception_handler(ValidationError)
    def invalid(request: HttpRequest, exc: ValidationError) -> HttpResponse:
        message, field = sentence(exc.errors[0]) if exc.errors else ("The request is not valid.", None)
        return problem(message, 400, field)

    @api.exception_handler(HttpError)
    def http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
        cause = exc.__cause__
        if isinstance(cause, ApiError):  # the body parser's refusal, wrapped by ninja
            return problem(str(cause), cause.status, cause.field)
        return problem(str(exc), exc.status_code)

    @api.exception_handler(AuthenticationError)
    def unauthenticated(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
        return problem("Authentication required: send `Authorization: Bearer <token>` with a token from "
                       "/account/tokens/.", 401)

    @api.exception_handler(MultiPartParserError)
    def bad_form(request: HttpRequest, exc: MultiPartParserError) -> HttpResponse:
        return problem(f"The request body is not valid multipart/form-data: {exc}", 400)

    @api.exception_handler(RequestDataTooBig)
    def too_big(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
        return problem("The request body is too large.", 413)

    @api.exception_handler(Http404)
    def not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
        return problem(str(exc) or "Not found.", 404)
