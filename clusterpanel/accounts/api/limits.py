"""/api/limits/: fair-use limits (requests per minute, concurrent jobs, tokens per day) — the lab's defaults, a
person's, a token's. Anyone reads their own and the defaults; lab admins read and set everyone's. A PATCH sets
the limits it names (null: none of its own) and leaves the others; a refusal saves nothing."""

from typing import Annotated

from django.http import HttpRequest
from ninja import Field, Router, Schema
from pydantic import BeforeValidator

from clusterpanel.accounts import limits
from clusterpanel.accounts.apiauth import admin_only, caller
from clusterpanel.accounts.models import ApiToken, LabLimits, User
from clusterpanel.kit.apikit import ApiError, Input, errors

router = Router()


def checked_as(name: str):
    def validate(value):
        try:
            return limits.checked_json(value, name)
        except limits.LimitError as exc:
            raise ValueError(str(exc)) from None
    return BeforeValidator(validate)


EMPTY = "Empty (null): no limit of its own."


class LimitsIn(Input):
    requests_per_minute: Annotated[int | None, checked_as("requests_per_minute")] = Field(
        None, description=f"Requests for answers in any 60 s (chat page, /api/jobs/, /v1/). {EMPTY}")
    concurrent_jobs: Annotated[int | None, checked_as("concurrent_jobs")] = Field(
        None, description=f"Chats and requests waiting or running at once (batch lines not counted). {EMPTY}")
    tokens_per_day: Annotated[int | None, checked_as("tokens_per_day")] = Field(
        None, description=f"Prompt and answer tokens per UTC day, batch lines included. {EMPTY}")


class Limits(Schema):
    requests_per_minute: int | None
    concurrent_jobs: int | None
    tokens_per_day: int | None


class Held(Schema):
    value: int
    source: str = Field(description="Whose limit it is: \"user\" (their own) or \"lab\" (the lab's default).")


class UserLimits(Schema):
    user: str
    own: Limits
    in_force: dict[str, Held] = Field(description="The limits that hold for them (a limit absent: none).")


class TokenLimits(Schema):
    id: int
    name: str
    user: str
    own: Limits = Field(description="They hold on top of the owner's limits.")


def user_limits(user: User) -> dict:
    return {"user": user.username, "own": user.own_limits(),
            "in_force": {name: {"value": held.value, "source": held.source}
                         for name, held in limits.for_user(user).items()}}


def token_limits(token: ApiToken) -> dict:
    return {"id": token.pk, "name": token.name, "user": token.user.username, "own": token.own_limits()}


def changed(target, payload: LimitsIn) -> None:
    try:
        limits.set_limits(target, {name: getattr(payload, name) for name in payload.model_fields_set})
    except limits.LimitError as exc:
        raise ApiError(str(exc), 400, exc.field) from None


@router.get("/defaults/", response={200: Limits, **errors()}, summary="The lab's default limits")
def get_defaults(request: HttpRequest):
    return LabLimits.current().own_limits()


@router.patch("/defaults/", response={200: Limits, **errors(403)}, summary="Set the lab's default limits")
def set_defaults(request: HttpRequest, payload: LimitsIn):
    admin_only(request, "set the lab's default limits")
    defaults = LabLimits.current()
    changed(defaults, payload)
    return defaults.own_limits()


def person(request: HttpRequest, username: str) -> User:
    user = caller(request)
    named = len(username) <= 150 and username.isprintable()  # PostgreSQL refuses a NUL in text: a 500
    found = User.objects.filter(username=username).first() if named else None
    if found is None or (found != user and not user.is_lab_admin):
        raise ApiError(f"There is no user {username} whose limits you may see.", 404)  # others' not confirmed
    return found


@router.get("/users/{username}/", response={200: UserLimits, **errors(404)}, summary="A person's limits")
def get_user_limits(request: HttpRequest, username: str):
    return user_limits(person(request, username))


@router.patch("/users/{username}/", response={200: UserLimits, **errors(403, 404)}, summary="Set a person's limits")
def set_user_limits(request: HttpRequest, username: str, payload: LimitsIn):
    admin_only(request, "set people's limits")
    found = person(request, username)
    changed(found, payload)
    return user_limits(found)


def token(request: HttpRequest, pk: int) -> ApiToken:
    user = caller(request)
    tokens = ApiToken.objects.select_related("user")
    found = tokens.filter(pk=pk).first() if 0 < pk < 2**63 else None
    if found is None or (found.user_id != user.pk and not user.is_lab_admin):
        raise ApiError(f"There is no token {pk} of yours.", 404)
    return found


@router.get("/tokens/{int:pk}/", response={200: TokenLimits, **errors(404)}, summary="An API token's limits")
def get_token_limits(request: HttpRequest, pk: int):
    return token_limits(token(request, pk))


@router.patch("/tokens/{int:pk}/", response={200: TokenLimits, **errors(403, 404)},
              summary="Set an API token's limits")
def set_token_limits(request: HttpRequest, pk: int, payload: LimitsIn):
    admin_only(request, "set tokens' limits")
    found = token(request, pk)
    changed(found, payload)
    return token_limits(found)
