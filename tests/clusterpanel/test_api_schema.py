"""The REST API describes itself: an OpenAPI 3.1 schema at /api/schema/ naming every operation with the errors
it may answer, and browsable docs at /api/docs/ whose every asset the panel serves (an offline lab has no CDN),
within the panel's Content-Security-Policy."""

import json
from urllib.parse import urlparse

from django.test import Client

from tests.browser import browser_page


def no_key_twice(pairs: list) -> dict:
    keys = [key for key, _ in pairs]
    assert len(keys) == len(set(keys)), f"a key twice in one object (Swagger refuses the schema): {keys}"
    return dict(pairs)


def test_the_schema_is_openapi_3_1_and_documents_every_operation_and_its_errors(db):
    schema = json.loads(Client().get("/api/schema/").content, object_pairs_hook=no_key_twice)
    assert schema["openapi"].startswith("3.1")
    operations = [(path, method, op) for path, methods in schema["paths"].items() for method, op in methods.items()]
    assert len(operations) >= 20
    assert {"/api/jobs/", "/api/nodes/{name}/actions/{pk}/events/", "/api/tokens/{pk}/"} <= set(schema["paths"])
    for path, method, op in operations:
        assert path.startswith("/api/"), path
        assert {"400", "401"} <= set(map(str, op["responses"])), f"{method} {path} documents no 400/401"
        assert op.get("summary"), f"{method} {path} says nothing of itself"
    error = schema["components"]["schemas"]["Error"]
    assert set(error["properties"]) == {"error", "field"}
    assert Client().get("/api/").json() == {"schema": "/api/schema/", "docs": "/api/docs/"}


def test_the_schema_declares_bearer_tokens_and_points_to_the_openai_api(db):
    """Swagger's Authorize button and generated clients learn the token from the schema; its description says
    where the model itself answers (/v1/, which the schema does not describe)."""
    schema = Client().get("/api/schema/").json()
    schemes = schema["components"]["securitySchemes"]
    assert schemes and all((s["type"], s["scheme"]) == ("http", "bearer") for s in schemes.values()), schemes
    names = set(schemes)
    for path, methods in schema["paths"].items():
        for method, op in methods.items():
            assert {name for need in op.get("security", []) for name in need} == names, f"{method} {path}"
    description = schema["info"]["description"]
    assert "/v1/" in description and "OpenAI-compatible" in description and "docs/api.md" in description


def test_the_docs_load_from_the_panel_alone_and_list_the_operations(web_server):
    outside = []
    with browser_page() as page:
        page.on("request", lambda request: urlparse(request.url).netloc != urlparse(web_server).netloc
                and not request.url.startswith("data:") and outside.append(request.url))
        page.goto(f"{web_server}/api/docs/")
        page.wait_for_selector(".opblock-summary-path >> text=/api/nodes/{name}/actions/", timeout=30_000)
        assert page.locator(".opblock").count() >= 20
        assert "clusterpanel" in page.locator(".title").first.inner_text()
        assert not page.watch.errors, page.watch.errors
    assert not outside, f"the docs asked for {outside}"
