"""Bad input is refused before availability is considered: with no deployment ready, a request with a bad
parameter gets the 400 naming it that it gets when one is ready, at both doors, not 503 "No deployment is
ready" (which it would get again, fixed, only to learn then that its input was wrong)."""

import pytest
import requests

from clusterpanel.accounts.models import ApiToken

CHAT = [{"role": "user", "content": "Hi"}]


@pytest.fixture
def auth(transactional_db, bob) -> dict:
    return {"Authorization": f"Bearer {ApiToken.issue(bob, 'script')[1]}"}


@pytest.mark.parametrize("params, field", [({"max_tokens": 32.0}, "params.max_tokens"),
                                           ({"temperature": 3}, "params.temperature"),
                                           ({"tempreature": 1}, "params.tempreature")])
def test_the_rest_door_names_the_bad_parameter_with_no_deployment_ready(web_server, auth, params, field):
    refused = requests.post(f"{web_server}/api/jobs/", json={"messages": CHAT, "params": params}, headers=auth,
                            timeout=30)
    assert refused.status_code == 400 and refused.json()["field"] == field, refused.text
    fine = requests.post(f"{web_server}/api/jobs/", json={"messages": CHAT, "params": {"max_tokens": 32}},
                         headers=auth, timeout=30)
    assert fine.status_code == 503 and "No deployment is ready" in fine.json()["error"], fine.text


@pytest.mark.parametrize("body, param", [({"max_tokens": 32.0}, "max_tokens"), ({"temperature": 3}, "temperature"),
                                         ({"top_k": -1}, "top_k"), ({"stop": ["x"] * 5}, "stop"),
                                         ({"max_completion_tokens": 0}, "max_completion_tokens")])
def test_the_openai_door_names_the_bad_parameter_with_no_deployment_ready(web_server, auth, body, param):
    for path in ("/v1/chat/completions", "/v1/completions"):
        text = {"messages": CHAT} if path.endswith("chat/completions") else {"prompt": "Once"}
        refused = requests.post(f"{web_server}{path}", json={**text, **body}, headers=auth, timeout=30)
        assert refused.status_code == 400 and refused.json()["error"]["param"] == param, refused.text
    fine = requests.post(f"{web_server}/v1/chat/completions", json={"messages": CHAT}, headers=auth, timeout=30)
    assert fine.status_code == 503 and fine.json()["error"]["code"] == "model_not_available", fine.text
