"""Fair use: whether a person, and the API token they came with, may queue another job now; and which batch
items wait for their owner's tokens of the day.

The limits (clusterpanel/accounts/limits.py says whose each is) are checked where people ask for answers — the chat
page, POST /api/jobs/, /v1/chat/completions and /v1/completions — once a request's input is found good:

- concurrent jobs: their chats and requests waiting or running, read from the database. Batch items are not
  counted: a batch is one upload whose lines wait their turn anyway.
- tokens per day: the prompt and answer tokens of the jobs that ended today, UTC (the usage ledger,
  jobs.models.Usage). A job let in under the limit runs to its end, so a day may end a little over it.
- requests per minute: a sliding window in Redis (ratewindow.py), checked last because it records the request.

Over one, the request is refused (429) with the seconds until it may come again. A token's limits hold on top
of its owner's. Batch items are never refused: an item whose owner or token has spent the day's tokens is
held in the queue (`claim_next` passes over it) until midnight UTC.
"""

from datetime import UTC, datetime, timedelta

from django.db.models import Q, Sum

from clusterpanel.accounts import limits
from clusterpanel.accounts.limits import InForce
from clusterpanel.accounts.models import ApiToken, LabLimits, User
from jobs.models import Job, JobStatus, Usage, utc_today
from jobs.queue import ratewindow

# When one of a person's running answers will end cannot be known: a short wait, said to be a guess.
CONCURRENT_RETRY_S = 5


class OverLimit(Exception):
    """A refusal in words, the whole seconds until the request may come again (Retry-After), and what OpenAI's
    error type calls the limit: "requests" or "tokens"."""

    def __init__(self, message: str, retry_after: int, kind: str) -> None:
        super().__init__(message)
        self.retry_after, self.kind = retry_after, kind


def admit(user: User, token: ApiToken | None) -> None:
    """Nothing, or OverLimit for the first limit the request would go past."""
    held = [(entry, None) for entry in limits.for_user(user).values()]
    held += [(entry, token) for entry in limits.for_token(token).values()]
    for entry, by_token in held:
        if entry.name == "concurrent_jobs":
            check_concurrent(entry, user, by_token)
    for entry, by_token in held:
        if entry.name == "tokens_per_day":
            check_tokens(entry, user, by_token)
    per_minute = [(entry, by_token) for entry, by_token in held if entry.name == "requests_per_minute"]
    full = ratewindow.take([(subject(user, by_token), entry.value) for entry, by_token in per_minute])
    if full is not None:
        entry, by_token = per_minute[full.index]
        raise OverLimit(f"{limit_of(entry)} is {entry.value} request{'s' * (entry.value != 1)} per minute, and "
                        f"{sent(by_token)} {entry.value} in the last minute. {again(full.retry_after)}",
                        full.retry_after, "requests")


def subject(user: User, token: ApiToken | None) -> str:
    return f"token:{token.pk}" if token is not None else f"user:{user.pk}"


def limit_of(entry: InForce) -> str:
    """"Your limit", "The lab's default limit", "The API token “nightly”'s limit"."""
    return f"{entry.whose[:1].upper()}{entry.whose[1:]} limit"


def sent(token: ApiToken | None) -> str:
    return "it has sent" if token is not None else "you have sent"


def check_concurrent(entry: InForce, user: User, token: ApiToken | None) -> None:
    unfinished = Job.objects.filter(status__in=(JobStatus.QUEUED, JobStatus.RUNNING), batch__isnull=True)
    count = unfinished.filter(**({"api_token": token} if token else {"user": user})).count()
    if count >= entry.value:
        who = "it has" if token else "you have"
        raise OverLimit(f"{limit_of(entry)} is {entry.value} concurrent job{'s' * (entry.value != 1)}, and {who} "
                        f"{count} waiting or running. Send this once one of them has ended (Retry-After says "
                        f"{CONCURRENT_RETRY_S} s, a guess: when a running answer ends cannot be known).",
                        CONCURRENT_RETRY_S, "requests")


def check_tokens(entry: InForce, user: User, token: ApiToken | None) -> None:
    spent = Usage.spent_today(**({"api_token": token} if token else {"user": user}))
    if spent >= entry.value:
        who = "it has" if token else "you have"
        wait = until_midnight()
        raise OverLimit(f"{limit_of(entry)} is {entry.value:,} tokens per day (UTC), and {who} used {spent:,} "
                        f"today. The count starts again at midnight UTC: {again(wait)}", wait, "tokens")


def until_midnight(now: datetime | None = None) -> int:
    """Whole seconds until the next UTC day, when the tokens of the day count from zero again."""
    now = now or datetime.now(UTC)
    midnight = datetime.combine(now.date() + timedelta(days=1), datetime.min.time(), tzinfo=UTC)
    return max(1, int((midnight - now).total_seconds() + 0.999))


def again(seconds: int) -> str:
    at = datetime.now(UTC) + timedelta(seconds=seconds)
    return f"Try again in {in_words(seconds)} (at {at:%H:%M:%S} UTC)."


def in_words(seconds: int) -> str:
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min {seconds} s" if minutes else f"{seconds} s"


# Batch items: held, never refused


def over_today(user_ids: set[int], token_ids: set[int]) -> tuple[set[int], set[int]]:
    """Of these people and tokens, those who have spent today's tokens (by their limit in force)."""
    defaults = LabLimits.current()
    users = {user.pk: limits.for_user(user, defaults).get("tokens_per_day")
             for user in User.objects.filter(pk__in=user_ids)}
    tokens = {token.pk: token.tokens_per_day for token in ApiToken.objects.filter(pk__in=token_ids)}
    users = {pk: entry.value for pk, entry in users.items() if entry is not None}
    tokens = {pk: value for pk, value in tokens.items() if value is not None}
    return spent_past(users, "user"), spent_past(tokens, "api_token")


def spent_past(limit_by_id: dict[int, int], field: str) -> set[int]:
    if not limit_by_id:
        return set()
    today = Usage.objects.filter(day=utc_today(), **{f"{field}__in": list(limit_by_id)})
    spent = today.order_by().values(field).annotate(n=Sum("prompt_tokens") + Sum("completion_tokens"))
    return {row[field] for row in spent if row["n"] >= limit_by_id[row[field]]}


def held_items(waiting) -> Q | None:
    """Which of the `waiting` batch items must wait for tomorrow's tokens; None when none must."""
    owners = set(waiting.order_by().values_list("user_id", "api_token_id").distinct())
    users, tokens = over_today({user for user, _ in owners if user}, {token for _, token in owners if token})
    if not users and not tokens:
        return None
    return Q(user_id__in=users) | Q(api_token_id__in=tokens)


def batch_hold(user: User | None, token_ids: set[int]) -> str | None:
    """Why a batch's waiting items are held, in words; None when they are not."""
    users, tokens = over_today({user.pk} if user else set(), token_ids)
    if not users and not tokens:
        return None
    whose = "its owner has" if users else "the API token it was sent with has"
    return (f"Waiting: {whose} used the day's tokens (the tokens-per-day limit). Its requests go on at midnight "
            f"UTC, in {in_words(until_midnight())}; nothing is lost meanwhile.")
