"""/api/tokens/: a person's API tokens, made and revoked by script; a lab admin sees and revokes everyone's."""

from datetime import datetime

from django.http import HttpRequest
from django.views.decorators.debug import sensitive_variables
from ninja import Field, Query, Router, Schema, Status

from clusterpanel.accounts import tokens
from clusterpanel.accounts.apiauth import caller
from clusterpanel.accounts.models import ApiToken
from clusterpanel.kit.apikit import ApiError, Input, Page, Paging, errors, paged

router = Router()


class TokenIn(Input):
    name: str = Field(max_length=100)
    read_only: bool = Field(False, description="Reads only: any method but GET and HEAD is refused (403).")
    expires_in_days: int | None = Field(None, ge=1, le=tokens.MAX_DAYS, description=(
        "None: it never ends — or, made with a token that ends, when that one does (never later)."))


class TokenOut(Schema):
    id: int
    user: str
    name: str
    prefix: str
    read_only: bool
    created: datetime
    expires: datetime | None
    last_used: datetime | None


class NewToken(TokenOut):
    key: str = Field(description="The token itself: shown only in this answer, kept by the panel only as a hash.")


def described(token: ApiToken) -> dict:
    return {"id": token.pk, "user": token.user.username, "name": token.name, "prefix": token.prefix,
            "read_only": token.read_only, "created": token.created, "expires": token.expires,
            "last_used": token.last_used}


def refused(exc: tokens.TokenError) -> ApiError:
    return ApiError(str(exc), exc.status, exc.field)


@router.get("/", response={200: Page[TokenOut], **errors(403)}, summary="List API tokens, newest first")
def list_tokens(request: HttpRequest, *,
                all: bool = Query(False, description="Everyone's (lab admins only)."), paging: Query[Paging]):
    try:
        listed = tokens.visible(caller(request), everyone=all).order_by("-created", "-pk")
    except tokens.TokenError as exc:
        raise refused(exc) from None
    return paged(request, listed, described, paging)


@router.post("/", response={201: NewToken, **errors(403)}, summary="Make an API token")
@sensitive_variables("key")
def make_token(request: HttpRequest, payload: TokenIn):
    try:
        token, key = tokens.make(caller(request), payload.name, payload.read_only, payload.expires_in_days,
                                 made_with=getattr(request, "api_token", None))
    except tokens.TokenError as exc:
        raise refused(exc) from None
    return Status(201, {**described(token), "key": key})


@router.delete("/{int:pk}/", response={204: None, **errors(404)}, summary="Revoke an API token")
def revoke_token(request: HttpRequest, pk: int):
    try:
        tokens.revoke(caller(request), pk)
    except tokens.TokenError as exc:
        raise refused(exc) from None
    return Status(204, None)
