"""API tokens, for the tokens page and the API alike: what a new one may be, who sees and revokes which."""

from datetime import timedelta

from django.db.models import QuerySet
from django.utils import timezone

from clusterpanel.accounts.models import ApiToken, User

MAX_DAYS = 3650


class TokenError(ValueError):
    def __init__(self, message: str, field: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.field, self.status = field, status


def make(user: User, name: str, read_only: bool = False, days: int | None = None,
         made_with: ApiToken | None = None) -> tuple[ApiToken, str]:
    """A new token of `user` and its key (shown once). `days`: it ends that many days from now; None: never.
    `made_with`: the token the request came with; the new one ends no later than it (a short-lived token
    must not make itself a lasting one)."""
    name = name.strip() if isinstance(name, str) else ""
    if not name or len(name) > 100 or not name.isprintable():  # PostgreSQL refuses a NUL in text: a 500
        raise TokenError("Give the token a name of up to 100 printable characters, e.g. the script that uses it.",
                         "name")
    if days is not None and (isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_DAYS):
        raise TokenError(f"A token ends after 1 to {MAX_DAYS} days, or never.", "expires_in_days")
    expires = timezone.now() + timedelta(days=days) if days else None
    if made_with is not None and made_with.expires is not None:
        expires = min(expires or made_with.expires, made_with.expires)
    return ApiToken.issue(user, name, read_only=bool(read_only), expires=expires)


def visible(user: User, everyone: bool = False) -> QuerySet[ApiToken]:
    """`user`'s tokens; a lab admin's `everyone`: every person's."""
    if everyone and not user.is_lab_admin:
        raise TokenError("Only lab admins see everyone's tokens.", "all", status=403)
    tokens = ApiToken.objects.select_related("user")
    return tokens if everyone else tokens.filter(user=user)


def revoke(user: User, pk: int) -> ApiToken:
    """Deletes the token (its owner's, or anyone's for a lab admin); scripts using it get 401 from then on."""
    token = visible(user, everyone=user.is_lab_admin).filter(pk=pk).first() if 0 < pk < 2**63 else None
    if token is None:
        raise TokenError(f"There is no token {pk} of yours.", status=404)  # others' ids are not confirmed
    token.delete()
    return token
