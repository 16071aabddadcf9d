"""Generated hostile values at the fair-use doors — the limits API, the Users page's limits forms, usage on its
page and in /api/ — as a lab admin: no view answers 5xx; the API refuses in its shape, a form shows itself
again with the error or redirects. The values and the checks are those of tests/security/test_views_fuzz.py."""

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.jobs.conftest import bearer
from tests.security.test_views_fuzz import (  # noqa: F401 (clients_of_this_test: a fixture)
    EXAMPLES,
    RAW_BODIES,
    anonymous,
    body_of,
    clients_of_this_test,
    encoded,
    form_shape,
    form_values,
    posted,
    query,
    query_values,
    rest_shape,
    signed_in,
)

LIMITS = {"requests_per_minute": 60, "concurrent_jobs": 2, "tokens_per_day": 100_000}
FEWER = settings(EXAMPLES, max_examples=40)  # small checks, each value one at a time: fewer examples suffice


@FEWER
@given(body=body_of(LIMITS) | RAW_BODIES, where=st.sampled_from(["defaults", "users/bob", "users/%00", "tokens/1"]))
def test_it_answers_the_limits_api_in_shape(alice, bob, body, where):
    raw = body if isinstance(body, bytes) else encoded(body)
    rest_shape(anonymous().patch(f"/api/limits/{where}/", raw, content_type="application/json", **bearer(alice)))


@FEWER
@given(values=form_values({name: str(value) for name, value in LIMITS.items()}), where=st.sampled_from(
    ["/users/limits/", "/users/{bob}/limits/"]))
def test_it_answers_the_limits_forms(alice, bob, values, where):
    form_shape(signed_in(alice).post(where.format(bob=bob.pk), posted(values)))


@FEWER
@given(since=query_values(), until=query_values(), user=query_values(), everyone=query_values(),
       form=st.sampled_from([b"json", b"csv"]) | query_values(), page=st.booleans())
def test_it_answers_usage_in_shape(alice, since, until, user, everyone, form, page):
    asked = query(since=since, until=until, user=user, all=everyone, format=form)
    if page:
        form_shape(signed_in(alice).get(f"/usage/?{asked}"))
    else:
        rest_shape(anonymous().get(f"/api/usage/?{asked}", **bearer(alice)))
