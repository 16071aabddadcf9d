"""Every answer under /v1 is JSON in OpenAI's error shape, a path the panel does not serve too: the `openai`
client asking for moderations gets a NotFoundError it can read, not Django's HTML page."""

import openai
import pytest
import requests

from clusterpanel.accounts.models import ApiToken


@pytest.fixture
def key(transactional_db, bob) -> str:
    return ApiToken.issue(bob, "client")[1]


def test_the_openai_client_hears_that_moderations_are_not_served(web_server, key):
    client = openai.OpenAI(base_url=f"{web_server}/v1", api_key=key, max_retries=0)
    with pytest.raises(openai.NotFoundError) as refused:
        client.moderations.create(model="any", input="hi")
    error = refused.value.body
    assert error["type"] == "invalid_request_error" and "Invalid URL (POST /v1/moderations)" in error["message"], error
    assert "embeddings" in error["message"], "what is served is said"


@pytest.mark.parametrize("method, path", [("GET", "/v1/files/"), ("POST", "/v1/batches/"),
                                          ("GET", "/v1/nonexistent"), ("DELETE", "/v1/models/x/y"), ("GET", "/v1/")])
def test_a_path_that_names_nothing_is_a_json_404_in_openais_shape(web_server, key, method, path):
    answer = requests.request(method, f"{web_server}{path}", headers={"Authorization": f"Bearer {key}"},
                              json={}, timeout=30)
    assert answer.status_code == 404 and answer.headers["Content-Type"] == "application/json", answer.text[:200]
    assert set(answer.json()["error"]) == {"message", "type", "param", "code"}
    assert f"({method} {path})" in answer.json()["error"]["message"]
    if path.endswith("/") and path != "/v1/":
        assert f"without a slash: {path.rstrip('/')}?" in answer.json()["error"]["message"]


def test_an_unknown_path_is_a_json_404_without_a_key_or_a_csrf_token(web_server):
    answer = requests.post(f"{web_server}/v1/moderations", json={"input": "hi"}, timeout=30)
    assert answer.status_code == 404 and answer.json()["error"]["type"] == "invalid_request_error", answer.text[:200]
