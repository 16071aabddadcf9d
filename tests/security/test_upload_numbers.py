"""Issue 12, item 6 (the upload's part): odd numbers in the upload protocol answer a 400 in the API's shape
({"error", "field"}) naming the field, never a 500, and start nothing: no upload row, no part file. The API
takes JSON types as declared (issue 15): a whole number is a JSON integer, not 1e3 nor "1000"."""

import pytest
from django.conf import settings

from models_app.models import Upload
from tests.conftest import PASSWORD
from tests.security import doors

NAME = '"name": "m.gguf"'
STARTS = {
    "a size of 1e400": f'{{{NAME}, "size": 1e400, "modified": 1}}',
    "a date of 10**30": f'{{{NAME}, "size": 1000, "modified": {10**30}}}',
    "a size past 64 bits": f'{{{NAME}, "size": {2**63}, "modified": 1}}',
    "a size of NaN": f'{{{NAME}, "size": NaN, "modified": 1}}',
    "a date of -Infinity": f'{{{NAME}, "size": 1000, "modified": -Infinity}}',
    "a size of 1.5": f'{{{NAME}, "size": 1.5, "modified": 1}}',
    "a size as true": f'{{{NAME}, "size": true, "modified": 1}}',
    "a size in other digits": f'{{{NAME}, "size": "\\u0661\\u0662", "modified": 1}}',
    "a size as a list": f'{{{NAME}, "size": [1000], "modified": 1}}',
    "a negative size": f'{{{NAME}, "size": -1000, "modified": 1}}',
    "a size of 1e3": f'{{{NAME}, "size": 1e3, "modified": 1}}',
    "a date in digits": f'{{{NAME}, "size": 1000, "modified": "1700000000000"}}',
}


@pytest.fixture
def admin(client, alice):
    doors.empty_model_folders()
    client.login(username="alice", password=PASSWORD)
    return client


def assert_nothing_started() -> None:
    assert not Upload.objects.exists()
    folder = settings.UPLOAD_DIR
    assert not folder.exists() or not any(folder.iterdir())


@pytest.mark.parametrize("body", STARTS.values(), ids=STARTS.keys())
def test_it_answers_odd_numbers_in_a_start_with_a_400(admin, body):
    answer = admin.post("/api/uploads/", body, content_type="application/json")
    assert answer.status_code == 400, answer.content[:300]
    refusal = answer.json()
    assert refusal["field"] in ("size", "modified") and refusal["error"].startswith(refusal["field"] + ":"), refusal
    assert_nothing_started()


def test_it_takes_whole_numbers_up_to_what_the_database_holds(admin):
    answer = admin.post("/api/uploads/", f'{{{NAME}, "size": 1000, "modified": {2**63 - 1}}}',
                        content_type="application/json")
    assert answer.status_code == 201 and answer.json()["size"] == 1000
    assert Upload.objects.get().modified == 2**63 - 1


@pytest.mark.parametrize("offset", ["\u00b2", "-1", "1e3", str(2**64), ""])
def test_it_answers_an_odd_chunk_offset_with_a_400(admin, offset):
    url = admin.post("/api/uploads/", f'{{{NAME}, "size": 1000, "modified": 1}}',
                     content_type="application/json").json()["url"]
    answer = admin.patch(url, b"GGUF", content_type="application/octet-stream", headers={"Upload-Offset": offset})
    assert answer.status_code == 400 and answer.json()["field"] == "Upload-Offset", answer.content[:300]
    assert "Upload-Offset" in answer.json()["error"]
    assert Upload.objects.get().received == 0
