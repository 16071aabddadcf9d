"""Hostile values at the selection's doors (the API's POST and follow, the Laptops page's action bar), as a lab
admin: whatever comes, no 5xx; the API answers 4xx in its documented shape, the page shows itself again or
redirects. The generators are the security suite's (tests/security/test_views_fuzz.py)."""

import pytest
from hypothesis import given, settings

from nodes.models import Node
from tests.jobs.conftest import bearer
from tests.rows import HOST_KEY
from tests.security.test_views_fuzz import (  # noqa: F401 (clients_of_this_test: a fixture)
    EXAMPLES,
    RAW_BODIES,
    anonymous,
    body_of,
    clients_of_this_test,
    encoded,
    form_shape,
    form_values,
    post_json,
    posted,
    query,
    query_values,
    rest_shape,
    signed_in,
)

pytestmark = pytest.mark.timeout(600)
FEW = settings(EXAMPLES, max_examples=30)  # three small doors: fewer examples than the suite's big ones


@pytest.fixture
def laptops(db) -> None:
    for i, name in enumerate(("lab-1", "lab-2")):
        Node.objects.get_or_create(name=name, defaults={"host": f"192.0.2.{i + 1}", "username": "lab",
                                                        "host_key": HOST_KEY})


@FEW
@given(body=body_of({"action": "probe", "nodes": ["lab-1", "lab-2"], "wipe": False}) | RAW_BODIES)
def test_it_answers_post_api_nodes_actions_in_shape(laptops, alice, body):
    raw = body if isinstance(body, bytes) else encoded(body)
    rest_shape(post_json(anonymous(), "/api/nodes/actions/", raw, **bearer(alice)))


@FEW
@given(ids=query_values())
def test_it_answers_a_selection_s_ids_in_shape(alice, ids):
    rest_shape(anonymous().get(f"/api/nodes/actions/?{query(ids=ids)}", **bearer(alice)))


@FEW
@given(values=form_values({"action": "remove", "node": "lab-1", "confirmed": "1", "wipe": "1"}))
def test_it_answers_the_action_bar(laptops, alice, values):
    form_shape(signed_in(alice).post("/nodes/actions/", posted(values)))
    form_shape(signed_in(alice).get(f"/nodes/?actions={posted(values).get('node', '')}"))
