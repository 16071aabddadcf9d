"""Issue 12, item 8 at the upload door: a model name that is one of the models pages is refused in words
when the upload starts, before any byte arrives (the check is the model's own, models_app/models.py)."""

import pytest

from models_app.models import Upload
from tests.conftest import PASSWORD
from tests.models_app.uploading import start
from tests.security import doors


@pytest.fixture
def admin(client, alice):
    doors.empty_model_folders()
    client.login(username="alice", password=PASSWORD)
    return client


@pytest.mark.parametrize("name", ["plan", "deployments"])
def test_it_refuses_a_page_as_the_model_name_when_an_upload_starts(admin, name):
    for given in ({"model_name": name}, {"name": f"{name}.gguf"}):
        answer = start(admin, **{"name": "m.gguf", "size": 1000, **given})
        assert answer.status_code == 422, answer.content
        assert f"/models/{name}/" in answer.json()["error"]
        assert answer.json()["field"] == next(iter(given)), "the refusal names the field the name came from"
    assert not Upload.objects.exists()
