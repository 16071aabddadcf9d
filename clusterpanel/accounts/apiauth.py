"""Who is calling an API: a bearer token (scripts) or, where allowed, a browser session.

API views opt out of the login redirect and of the CSRF middleware, then call
`authenticate`: a token needs no CSRF check (a browser never sends one by
itself), while a session on an unsafe method must pass the same CSRF check a
form would.
"""

from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest
from django.middleware.csrf import CsrfViewMiddleware
from django.views.decorators.debug import sensitive_variables

from clusterpanel.accounts.models import ApiToken, User
from clusterpanel.kit.apikit import ApiError

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


class Unauthorized(Exception):
    status = 401


class Forbidden(Unauthorized):
    status = 403


@sensitive_variables("header", "key")  # stars in a production error report (mailed or logged; DEBUG shows all)
def bearer(request: HttpRequest) -> str | None:
    """The token from `Authorization: Bearer <token>` (or Anthropic's `x-api-key: <token>`, which its SDK and
    Claude Code send); "" when the header is there but malformed."""
    header = request.headers.get("Authorization")
    if header is None:
        return request.headers.get("x-api-key")
    scheme, _, key = header.partition(" ")
    return key.strip() if scheme.lower() == "bearer" else ""


@sensitive_variables("key")
def authenticate(request: HttpRequest, session: bool = True) -> User:
    """The calling user, or Unauthorized/Forbidden with a sentence saying why. A token's own limits hold: an
    expired one is refused, a read-only one may only read. The token used is `request.api_token` (None for a
    browser session)."""
    request.api_token = None
    key = bearer(request)
    if key is not None:
        token = ApiToken.holding(key) if key else None
        if token is None:
            raise Unauthorized("The API token is missing, malformed, revoked or unknown. "
                               "Send `Authorization: Bearer <token>` with a token from /account/tokens/.")
        if token.expired:
            raise Unauthorized(f"The API token “{token.name}” expired at {token.expires:%Y-%m-%d %H:%M} UTC; "
                               "make a new one at /account/tokens/.")
        if token.read_only and request.method not in SAFE_METHODS:
            raise Forbidden(f"The API token “{token.name}” is read-only: it may only read (GET).")
        request.api_token = token
        return token.user
    user = getattr(request, "user", AnonymousUser()) if session else AnonymousUser()
    if not user.is_authenticated:
        raise Unauthorized("Authentication required: send `Authorization: Bearer <token>` "
                           "with a token from /account/tokens/.")
    refused = CsrfViewMiddleware(lambda r: None).process_view(request, None, (), {})
    if refused is not None:
        raise Forbidden("CSRF check failed: a browser session must send the CSRF token on unsafe methods.")
    return user


def own_or_everyones(request: HttpRequest, listed, everyone: bool, what: str):
    """`listed` narrowed to the caller's own; with `everyone` (?all=1), all of it — for lab admins alone."""
    user = caller(request)
    if everyone and not user.is_lab_admin:
        raise ApiError(f"Only lab admins can list everyone's {what} (?all=1).", 403, "all")
    return listed if everyone else listed.filter(user=user)


def caller(request: HttpRequest) -> User:
    return request.auth


def admin_only(request: HttpRequest, what: str) -> User:
    """The caller, if a lab admin (403 saying `what` is theirs otherwise)."""
    user = caller(request)
    if not user.is_lab_admin:
        raise ApiError(f"Only lab admins can {what}.", 403)
    return user


class PanelAuth:
    """A bearer token (its owner's role, its own limits) or a browser session (CSRF-checked on changes)."""

    # What the schema declares (ninja reads it), so Swagger's Authorize button and generated clients send tokens
    openapi_security_schema = {"type": "http", "scheme": "bearer", "description": (
        "An API token from /account/tokens/ (or POST /api/tokens/), sent as `Authorization: Bearer cp_...`.")}

    def __call__(self, request: HttpRequest) -> User:
        try:
            user = authenticate(request)
        except Unauthorized as exc:
            raise ApiError(str(exc), exc.status) from None
        request.user = user
        return user
