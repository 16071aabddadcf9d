"""A fault of the panel's own reaches a script in its API's JSON shape (OpenAI's on /v1), never as Django's HTML
page, and names nothing of what went wrong; a person still gets the page."""

import pytest
from django.test import Client

from clusterpanel.accounts.models import ApiToken
from tests.conftest import PASSWORD

SECRET = "a detail only the log may hold"


def broken(*args, **kwargs):
    raise RuntimeError(SECRET)


@pytest.fixture
def client(alice) -> Client:
    return Client(raise_request_exception=False, HTTP_AUTHORIZATION=f"Bearer {ApiToken.issue(alice, 't')[1]}")


def test_v1_answers_a_500_in_openais_shape(client, monkeypatch):
    monkeypatch.setattr("jobs.queue.queueing.usable_deployments", broken)
    answer = client.get("/v1/models")
    assert answer.status_code == 500 and answer["Content-Type"] == "application/json"
    error = answer.json()["error"]
    assert error["type"] == "server_error" and error["code"] == "internal_error"
    assert SECRET not in answer.content.decode()


def test_the_rest_api_answers_a_500_in_its_shape(client, monkeypatch):
    monkeypatch.setattr("models_app.api.library.model_row", broken)
    from models_app.models import GgufModel

    GgufModel.objects.create(name="m", path="/nonexistent/m.gguf", size=1, architecture="llama", n_layer=1,
                             n_embd=8, n_head=1, n_head_kv=1, context_length=512, vocab_size=32, file_type="Q4_1")
    answer = client.get("/api/models/")
    assert answer.status_code == 500 and answer["Content-Type"] == "application/json"
    assert answer.json()["field"] is None and "log" in answer.json()["error"]
    assert SECRET not in answer.content.decode()


def test_a_page_still_answers_a_500_page(alice, monkeypatch):
    monkeypatch.setattr("clusterpanel.status.all_checks", broken)
    browser = Client(raise_request_exception=False)
    browser.login(username="alice", password=PASSWORD)
    answer = browser.get("/status/")
    assert answer.status_code == 500
    assert "application/json" not in answer["Content-Type"]
