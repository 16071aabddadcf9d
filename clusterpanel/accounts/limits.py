"""Fair-use limits as a lab admin sets them, for the Users page and /api/limits/ alike: what a limit may be,
the lab's defaults, and the limits in force for a person (their own, else the lab's) and for a token (its own,
on top of its owner's). Holding people to them is jobs/queue/admission.py's work."""

import re
from dataclasses import dataclass

from django.db import transaction

from clusterpanel.accounts.models import LIMITS, ApiToken, LabLimits, User

NAMES = {"requests_per_minute": "requests per minute", "concurrent_jobs": "concurrent jobs",
         "tokens_per_day": "tokens per day"}
HIGHEST = {"requests_per_minute": 100_000, "concurrent_jobs": 10_000, "tokens_per_day": 10**12}
WHOLE = re.compile(r"-?[0-9]+")  # ASCII digits only: "²".isdigit() is true, and int("²") fails


class LimitError(ValueError):
    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def checked(value, name: str) -> int | None:
    """A limit as typed (a form's text) or sent (JSON): a whole number from 1 up, or empty for none of its own."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    what = NAMES[name].capitalize()
    if isinstance(value, str) and WHOLE.fullmatch(value.strip()):
        value = int(value.strip()) if len(value.strip()) <= 20 else HIGHEST[name] + 1  # int() of 5000 digits fails
    if isinstance(value, bool) or not isinstance(value, int):
        raise LimitError(f"{what} must be a whole number, or left empty for no limit of its own.", name)
    if value < 1:
        raise LimitError(f"{what} must be 1 or more: to have no limit, leave it empty (0 would refuse "
                         "everything; to stop someone, disable the account or revoke the token).", name)
    if value > HIGHEST[name]:
        raise LimitError(f"{what} can be at most {HIGHEST[name]:,}; leave it empty for no limit.", name)
    return value


def checked_json(value, name: str) -> int | None:
    """A limit a script sent: JSON's own types, as everywhere in /api/ ("5" is not 5)."""
    if isinstance(value, str):
        raise LimitError(f"{NAMES[name].capitalize()} must be a whole number, not text (null: no limit of its own).",
                         name)
    return checked(value, name)


def checked_all(values: dict) -> dict[str, int | None]:
    """Every limit given in `values` checked, before any is saved: a refusal saves nothing."""
    unknown = set(values) - set(LIMITS)
    if unknown:
        raise LimitError(f"{sorted(unknown)[0]} is not a limit; the limits are {', '.join(LIMITS)}.")
    return {name: checked(value, name) for name, value in values.items()}


def set_limits(target: User | ApiToken | LabLimits, values: dict) -> None:
    """Set the limits given in `values` (others stay as they are); None clears one."""
    clean = checked_all(values)
    if not clean:
        return
    for name, value in clean.items():
        setattr(target, name, value)
    with transaction.atomic():
        if not type(target).objects.filter(pk=target.pk).update(**clean):
            target.save()  # the lab's defaults, set for the first time


def from_form(post, prefix: str = "") -> dict:
    """The limits a form sent, each field named `<prefix><limit>`."""
    return {name: post.get(prefix + name, "") for name in LIMITS}


@dataclass(frozen=True)
class InForce:
    """One limit that holds for a request: its value, and whose it is (in words, for the refusal)."""

    name: str
    value: int
    source: str  # "user", "lab" (the default) or "token"
    whose: str  # "your", "the lab's default", "the API token “nightly”'s"


def for_user(user: User, defaults: LabLimits | None = None) -> dict[str, InForce]:
    """The person's own limits, else the lab's defaults; a limit neither sets is absent."""
    defaults = defaults or LabLimits.current()
    held = {}
    for name in LIMITS:
        own, default = getattr(user, name), getattr(defaults, name)
        if own is not None:
            held[name] = InForce(name, own, "user", "your")
        elif default is not None:
            held[name] = InForce(name, default, "lab", "the lab's default")
    return held


def for_token(token: ApiToken | None) -> dict[str, InForce]:
    """The token's own limits (its owner's hold as well, through `for_user`)."""
    if token is None:
        return {}
    return {name: InForce(name, getattr(token, name), "token", f"the API token “{token.name}”'s")
            for name in LIMITS if getattr(token, name) is not None}
