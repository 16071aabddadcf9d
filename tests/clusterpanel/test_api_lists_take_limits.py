"""Every list of the REST API pages as docs/api.md says lists do: `?limit=` (1–200) and `?offset=`, answering
{count, limit, offset, next, results} — the tokens, the model library, the unfinished uploads and a laptop's
actions too, which once answered everything at once (or the 50 latest actions) whatever the limit."""

import pytest
import requests

from clusterpanel.accounts.models import ApiToken
from models_app.models import GgufModel, Upload
from nodes.models import ActionKind, Node, NodeAction
from tests.rows import HOST_KEY


def model(name: str) -> GgufModel:
    return GgufModel.objects.create(name=name, path=f"/nonexistent/{name}.gguf", size=1, architecture="llama",
                                    n_layer=2, n_embd=8, n_head=1, n_head_kv=1, context_length=2048,
                                    vocab_size=32, file_type="Q4_1")


@pytest.fixture
def three_of_each(transactional_db, alice):
    for n in range(3):
        ApiToken.issue(alice, f"token {n}")
        model(f"model-{n}")
        Upload.objects.create(owner=alice, name=f"m{n}.gguf", size=1000, modified=n, model_name=f"upload-{n}")
    laptop = Node.objects.create(name="lab-1", host="10.0.0.1", username="lab", host_key=HOST_KEY)
    for kind in (ActionKind.PROBE, ActionKind.INSTALL_RUNTIME, ActionKind.PROBE):
        NodeAction.objects.create(node=laptop, kind=kind)


@pytest.mark.parametrize("path, key", [("/api/tokens/", "name"), ("/api/models/", "name"),
                                       ("/api/uploads/", "model_name"), ("/api/nodes/lab-1/actions/", "id")])
def test_a_list_answers_the_page_asked_for(web_server, alice, three_of_each, path, key):
    auth = {"Authorization": f"Bearer {ApiToken.issue(alice, 'lister')[1]}"}  # a fourth token
    whole = requests.get(f"{web_server}{path}", headers=auth, timeout=30).json()
    first = requests.get(f"{web_server}{path}?limit=2", headers=auth, timeout=30).json()
    assert first["limit"] == 2 and first["offset"] == 0 and first["count"] == whole["count"] >= 3
    assert [item[key] for item in first["results"]] == [item[key] for item in whole["results"][:2]]
    rest = requests.get(f"{web_server}{first['next']}", headers=auth, timeout=30).json()
    assert [item[key] for item in first["results"] + rest["results"]] == [item[key] for item in whole["results"]]
    assert first["next"] == f"{path}?limit=2&offset=2"
    refused = requests.get(f"{web_server}{path}?limit=201", headers=auth, timeout=30)
    assert refused.status_code == 400 and refused.json()["field"] == "limit", refused.text
