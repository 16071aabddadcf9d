"""An API token never shows in an error report (what a mailed or logged report holds in production): an error
while a request's token is being checked shows the token's variables as stars, in every frame."""

import secrets
import sys

from django.db.models.query import QuerySet
from django.test import RequestFactory
from django.views.debug import ExceptionReporter

from clusterpanel.accounts import apiauth


def error_report(request) -> str:
    """The report of what went wrong checking `request`'s token, with every frame's variables."""
    try:
        apiauth.authenticate(request)
    except RuntimeError:
        return ExceptionReporter(request, *sys.exc_info()).get_traceback_html()
    raise AssertionError("the token check did not fail")


def test_it_keeps_the_bearer_token_out_of_an_error_report(db, monkeypatch):
    def database_fails(queryset):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(QuerySet, "first", database_fails)
    token = "cp_" + secrets.token_urlsafe(32)
    report = error_report(RequestFactory().get("/v1/models", HTTP_AUTHORIZATION=f"Bearer {token}"))
    assert "the database went away" in report and "user_for" in report
    assert token[3:] not in report
