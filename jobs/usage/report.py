"""Usage over a range of UTC days: rows per day, person and model, their totals, and the same as CSV. Who may see
whose: a lab admin everyone's, anyone else their own."""

import csv
import io
from datetime import date, timedelta

from django.db.models import Sum
from django.http import HttpResponse

from jobs.batches.output import inert
from jobs.models import Usage, utc_today

DEFAULT_DAYS = 30
MAX_DAYS = 366
CSV_FIELDS = ["day", "user", "model", "prompt_tokens", "completion_tokens", "total_tokens", "jobs"]
NOBODY = "(no user)"  # jobs without a user, or of a person since removed


class UsageError(ValueError):
    def __init__(self, message: str, field: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.field, self.status = field, status


def day(value, name: str) -> date | None:
    if value is None or value == "":
        return None
    if isinstance(value, str) and len(value) == 10:
        try:
            return date.fromisoformat(value)
        except ValueError:
            pass
    raise UsageError(f"{name} must be a day written YYYY-MM-DD, e.g. {utc_today().isoformat()}.", name)


def date_range(since, until) -> tuple[date, date]:
    """The days asked for (`since` to `until`, both included, UTC); by default the last DEFAULT_DAYS."""
    last = day(until, "until") or utc_today()
    first = day(since, "since") or last - timedelta(days=DEFAULT_DAYS - 1)
    if first > last:
        raise UsageError(f"since ({first}) is after until ({last}).", "since")
    if (last - first).days + 1 > MAX_DAYS:
        raise UsageError(f"Ask for at most {MAX_DAYS} days at a time.", "since")
    return first, last


def whose(viewer, everyone: bool, username: str | None) -> dict:
    """The filter for the people asked for: one person (named, or the viewer), or everyone (lab admins)."""
    if username:
        if username != viewer.username and not viewer.is_lab_admin:
            raise UsageError("Only lab admins see other people's usage.", "user", status=403)
        if len(username) > 150 or not username.isprintable():  # PostgreSQL refuses a NUL in text: a 500
            raise UsageError("user must be a person's user name.", "user")
        return {"user__username": username}
    if everyone:
        if not viewer.is_lab_admin:
            raise UsageError("Only lab admins see everyone's usage.", "all", status=403)
        return {}
    return {"user": viewer}


def rows(first: date, last: date, people: dict) -> list[dict]:
    """Tokens in (prompt) and out (answer) and jobs, per day, person and model, in that order."""
    found = (Usage.objects.filter(day__gte=first, day__lte=last, **people).order_by()
             .values("day", "user__username", "model")
             .annotate(prompt=Sum("prompt_tokens"), completion=Sum("completion_tokens"), n=Sum("jobs")))
    listed = [{"day": row["day"].isoformat(), "user": row["user__username"] or NOBODY, "model": row["model"],
               "prompt_tokens": row["prompt"], "completion_tokens": row["completion"],
               "total_tokens": row["prompt"] + row["completion"], "jobs": row["n"]} for row in found]
    return sorted(listed, key=lambda row: (row["day"], row["user"], row["model"]))


def totals(listed: list[dict]) -> dict:
    return {name: sum(row[name] for row in listed) for name in CSV_FIELDS[3:]}


def as_csv(listed: list[dict]) -> str:
    """Spreadsheet-safe (a user or model name that looks like a formula is shown as text), every cell quoted."""
    out = io.StringIO()
    writer = csv.DictWriter(out, CSV_FIELDS, quoting=csv.QUOTE_ALL)
    writer.writeheader()
    for row in listed:
        writer.writerow({name: inert(value) if isinstance(value, str) else value for name, value in row.items()})
    return out.getvalue()


def download(listed: list[dict], first: date, last: date) -> HttpResponse:
    answer = HttpResponse(as_csv(listed), content_type="text/csv; charset=utf-8")
    answer["Content-Disposition"] = f'attachment; filename="usage-{first}-{last}.csv"'
    return answer
