"""A laptop's cache cap is a size with its unit, set on its Edit form or by PATCH /api/nodes/<name>/: nothing,
negative, no unit or no size at all is refused in words, at either door, and nothing of the change is saved. A
script cleans the cache now as it starts any other action."""

import json

import pytest
from django.test import Client

from clusterpanel.accounts.models import ApiToken
from nodes.models import Node
from tests.rows import HOST_KEY, client_for

GiB = 2**30
REFUSED = [("0 GiB", "more than 0"), ("-5 GiB", "cannot be negative"), ("20", "Say the unit too, e.g. 20 GiB"),
           ("lots", "'lots' is not a size"), ("3 parsecs", "parsecs is not a unit of size"),
           ("0.5 KiB", "At least 1 MiB"), ("9000 TiB", "At most 1024.0 TiB")]


@pytest.fixture
def laptop(db) -> Node:
    return Node.objects.create(name="lab-1", host="10.0.0.1", username="lab", host_key=HOST_KEY)


def edit_form(node: Node, **changes) -> dict:
    return {"name": node.name, "host": node.host, "port": node.port, "username": node.username,
            "connection": node.connection, "install_dir": node.install_dir, "pipeline_order": node.pipeline_order,
            "reserve_gb": 1, "usable_gb": "", "cache_cap": "", **changes}


def script(alice) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {ApiToken.issue(alice, 'tests')[1]}")


def patch(alice, node: Node, body: dict):
    return script(alice).patch(f"/api/nodes/{node.name}/", json.dumps(body), content_type="application/json")


@pytest.mark.parametrize(("value", "words"), REFUSED)
def test_it_refuses_a_cap_that_is_no_size_at_the_form_and_the_api_saving_nothing(laptop, alice, value, words):
    page = client_for(alice).post(f"/nodes/{laptop.name}/edit/", edit_form(laptop, cache_cap=value,
                                                                          pipeline_order=7))
    assert page.status_code == 400 and words in " ".join(page.context["form"].errors["cache_cap"])
    answer = patch(alice, laptop, {"cache_cap": value, "pipeline_order": 7})
    assert answer.status_code == 400 and answer.json()["field"] == "cache_cap", answer.content
    assert words in answer.json()["error"]
    laptop.refresh_from_db()
    assert (laptop.cache_cap, laptop.pipeline_order) == (None, 0), "nothing of the change is saved"


def test_it_takes_a_size_with_its_unit_shows_it_back_and_returns_to_the_default(laptop, alice):
    page = client_for(alice).post(f"/nodes/{laptop.name}/edit/", edit_form(laptop, cache_cap="40 GiB"))
    assert page.status_code == 302
    laptop.refresh_from_db()
    assert laptop.cache_cap == 40 * GiB
    assert 'value="40 GiB"' in client_for(alice).get(f"/nodes/{laptop.name}/edit/").content.decode()
    answer = patch(alice, laptop, {"cache_cap": "500 GB"})
    assert answer.status_code == 200 and answer.json()["cache_cap"] == 500 * 10**9, answer.content
    assert patch(alice, laptop, {"cache_cap": 5}).status_code == 400, "a number without its unit is no size"
    assert patch(alice, laptop, {"cache_cap": None}).json()["cache_cap"] is None
    laptop.refresh_from_db()
    assert laptop.cache_cap is None


def test_a_script_cleans_a_laptops_cache_now_as_an_action(laptop, alice):
    answer = script(alice).post(f"/api/nodes/{laptop.name}/actions/", json.dumps({"kind": "clean_cache"}),
                                content_type="application/json")
    assert answer.status_code == 202 and answer.json()["kind"] == "clean_cache", answer.content
    assert laptop.actions.get().kind == "clean_cache"
    shown = script(alice).get(f"/api/nodes/{laptop.name}/").json()
    assert shown["cache"] is None and shown["cache_cap"] is None, "not listed yet, and the default cap"
