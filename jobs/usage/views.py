"""The Usage page: tokens per day, person and model over a chosen range, and the same as CSV. A lab admin sees
everyone's (or one person's); anyone else their own, with the limits that hold for them today."""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from clusterpanel.accounts import limits
from clusterpanel.accounts.models import User
from jobs.models import Usage
from jobs.usage import report


def usage_page(request: HttpRequest) -> HttpResponse:
    viewer, asked = request.user, request.GET
    context = {"people": User.objects.order_by("username") if viewer.is_lab_admin else [],
               "chosen_user": asked.get("user", ""), "since": asked.get("since", ""), "until": asked.get("until", ""),
               "today": today(viewer)}
    try:
        first, last = report.date_range(asked.get("since"), asked.get("until"))
        people = report.whose(viewer, viewer.is_lab_admin, asked.get("user") or None)
    except report.UsageError as exc:
        return render(request, "jobs/usage.html", {**context, "error": str(exc)}, status=exc.status)
    listed = report.rows(first, last, people)
    if asked.get("format") == "csv":
        return report.download(listed, first, last)
    return render(request, "jobs/usage.html", {
        **context, "first": first, "last": last, "since": first.isoformat(), "until": last.isoformat(),
        "rows": listed, "totals": report.totals(listed), "csv_query": csv_query(request)})


def today(viewer) -> dict:
    """The viewer's limits in force and the tokens they spent today: how close they are."""
    held = limits.for_user(viewer)
    return {"spent": Usage.spent_today(user=viewer),
            "limits": [{"label": limits.NAMES[name], "value": entry.value, "whose": WHOSE[entry.source]}
                       for name, entry in held.items()]}


WHOSE = {"user": "your own", "lab": "the lab's default"}


def csv_query(request: HttpRequest) -> str:
    query = request.GET.copy()
    query["format"] = "csv"
    return query.urlencode()
