"""Plumbing for the panel's JSON API: authentication, errors as JSON, and pages of lists."""

from collections.abc import Callable
from functools import wraps

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from clusterpanel import apiauth
from jobs.api.inputs import InputError

MAX_LIMIT, DEFAULT_LIMIT = 200, 50


def problem(message: str, status: int = 400, field: str | None = None) -> JsonResponse:
    return JsonResponse({"error": message, "field": field}, status=status)


def endpoint(*methods: str) -> Callable:
    """A view that takes a bearer token or a browser session (CSRF-checked) and answers errors in JSON."""

    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @login_not_required
        @csrf_exempt
        @wraps(view)
        def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            try:
                request.user = apiauth.authenticate(request)
                if request.method not in methods:
                    return problem(f"Use {' or '.join(methods)}.", 405)
                return view(request, *args, **kwargs)
            except apiauth.Unauthorized as exc:
                return problem(str(exc), exc.status)
            except InputError as exc:
                return problem(str(exc), exc.status, exc.param)

        return wrapped

    return decorate


def whole_number(request: HttpRequest, name: str, default: int, low: int, high: int) -> int:
    raw = request.GET.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InputError(f"{name} must be a whole number from {low} to {high}.", name) from None
    if not low <= value <= high:
        raise InputError(f"{name} must be a whole number from {low} to {high}.", name)
    return value


def page(request: HttpRequest, queryset, describe: Callable) -> JsonResponse:
    """`?limit=&offset=` over a queryset: {count, limit, offset, next, results}."""
    limit = whole_number(request, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
    offset = whole_number(request, "offset", 0, 0, 2**31)
    count = queryset.count()
    following = None
    if offset + limit < count:
        query = request.GET.copy()
        query["offset"] = str(offset + limit)
        following = f"{request.path}?{query.urlencode()}"
    return JsonResponse({"count": count, "limit": limit, "offset": offset, "next": following,
                         "results": [describe(item) for item in queryset[offset:offset + limit]]})
