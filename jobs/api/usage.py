"""/api/usage/: tokens in and out per day, person and model over a range of UTC days, as JSON or CSV. One's own;
a lab admin's, everyone's (?all=1) or one person's (?user=)."""

from typing import Literal

from django.http import HttpRequest
from ninja import Query, Router, Schema

from clusterpanel.accounts.apiauth import caller
from clusterpanel.kit.apikit import ApiError, errors
from jobs.usage import report

router = Router()


class UsageRow(Schema):
    day: str
    user: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    jobs: int


class Totals(Schema):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    jobs: int


class UsageOut(Schema):
    since: str
    until: str
    rows: list[UsageRow]
    totals: Totals


@router.get("/", response={200: UsageOut, **errors(403)}, summary="Tokens per day, person and model",
            openapi_extra={"responses": {200: {"content": {"text/csv": {"schema": {"type": "string"}}}}}})
def usage(request: HttpRequest,
          since: str | None = Query(None, description="First day, YYYY-MM-DD (UTC); default: 29 days before until."),
          until: str | None = Query(None, description="Last day, YYYY-MM-DD (UTC), included; default: today."),
          all: bool = Query(False, description="Everyone's (lab admins only)."),
          user: str | None = Query(None, description="One person's (lab admins; anyone may name themselves)."),
          format: Literal["json", "csv"] = "json"):
    try:
        first, last = report.date_range(since, until)
        listed = report.rows(first, last, report.whose(caller(request), all, user))
    except report.UsageError as exc:
        raise ApiError(str(exc), exc.status, exc.field) from None
    if format == "csv":
        return report.download(listed, first, last)
    return {"since": first.isoformat(), "until": last.isoformat(), "rows": listed, "totals": report.totals(listed)}
