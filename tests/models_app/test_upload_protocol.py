"""The upload protocol: chunks only where the panel stands, within the announced size, room and roles."""

import os
from collections import namedtuple
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone

from clusterpanel.accounts.models import ApiToken, Role, User
from models_app.models import GgufModel, Upload
from tests.conftest import PASSWORD
from tests.models_app.gguf_files import write_gguf
from tests.models_app.uploading import assert_nothing_left, send, send_all, start

CHUNK = 64 << 10


@pytest.fixture
def admin(client, alice, settings, empty_folders):
    settings.UPLOAD_CHUNK_BYTES = CHUNK
    client.login(username="alice", password=PASSWORD)
    return client


@pytest.fixture
def model_bytes(tmp_path) -> bytes:
    return write_gguf(tmp_path / "m.gguf", big=False, embd=128).read_bytes()


def test_it_appends_only_at_the_offset_it_has_and_says_which(admin, model_bytes):
    url = start(admin, "m.gguf", len(model_bytes)).json()["url"]
    assert send(admin, url, model_bytes[:CHUNK], 0).json() == {"offset": CHUNK}
    again = send(admin, url, model_bytes[:CHUNK], 0)
    assert again.status_code == 409 and again.json()["offset"] == CHUNK
    ahead = send(admin, url, model_bytes[2 * CHUNK:3 * CHUNK], 2 * CHUNK)
    assert ahead.status_code == 409 and ahead.json()["offset"] == CHUNK
    assert admin.get(url).json()["offset"] == CHUNK
    assert send_all(admin, url, model_bytes, CHUNK, offset=CHUNK).status_code == 201
    model = GgufModel.objects.get(name="m")
    assert Path(model.path).read_bytes() == model_bytes
    assert Path(model.path).parent == Path(settings.MODELS_DIR) and not Upload.objects.exists()


def test_it_refuses_a_chunk_past_the_announced_size_or_too_big(admin, model_bytes):
    url = start(admin, "m.gguf", 100).json()["url"]
    past = send(admin, url, model_bytes[:101], 0)
    assert past.status_code == 413 and "past the 100 bytes" in past.json()["error"]
    url = start(admin, "n.gguf", len(model_bytes)).json()["url"]
    too_big = send(admin, url, model_bytes[:CHUNK + 1], 0)
    assert too_big.status_code == 413 and f"at most {CHUNK} bytes" in too_big.json()["error"]
    assert [admin.get(f"/api/uploads/{u.pk}/").json()["offset"] for u in Upload.objects.all()] == [0, 0], \
        "a refused chunk leaves the upload as it was"


def test_it_refuses_sizes_over_the_limit_or_the_free_space(admin, settings, monkeypatch):
    settings.UPLOAD_MAX_BYTES = 10 << 30
    over = start(admin, "huge.gguf", (10 << 30) + 1)
    assert over.status_code == 422 and "accepts uploads up to 10.0 GiB" in over.json()["error"]
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr("shutil.disk_usage", lambda path: usage(8 << 30, 7 << 30, 1 << 30))
    no_room = start(admin, "big.gguf", 2 << 30)
    assert no_room.status_code == 422 and "only 1.0 GiB is free" in no_room.json()["error"]
    assert start(admin, "empty.gguf", 0).status_code == 422
    assert {over.json()["field"], no_room.json()["field"], start(admin, "empty.gguf", 0).json()["field"]} == {"size"}
    assert_nothing_left()


def test_it_continues_the_same_file_picked_again(admin, model_bytes):
    first = start(admin, "m.gguf", len(model_bytes), modified=1)
    assert first.status_code == 201
    send(admin, first.json()["url"], model_bytes[:CHUNK], 0)
    again = start(admin, "m.gguf", len(model_bytes), modified=1)
    assert again.status_code == 200 and again.json()["url"] == first.json()["url"]
    assert again.json()["offset"] == CHUNK
    other_date = start(admin, "m.gguf", len(model_bytes), modified=2)
    assert other_date.status_code == 422 and "already exists or is being uploaded" in other_date.json()["error"]
    assert other_date.json()["field"] == "name", "the model's name came from the file's"


def test_it_cancels_and_removes_the_part_file(admin, model_bytes):
    url = start(admin, "m.gguf", len(model_bytes)).json()["url"]
    send(admin, url, model_bytes[:CHUNK], 0)
    assert admin.delete(url).status_code == 200
    assert admin.get(url).status_code == 404
    assert_nothing_left()


def test_it_removes_uploads_left_for_a_day_when_another_starts(admin, model_bytes):
    url = start(admin, "old.gguf", len(model_bytes)).json()["url"]
    send(admin, url, model_bytes[:CHUNK], 0)
    old = Upload.objects.get()
    Upload.objects.filter(pk=old.pk).update(updated=timezone.now() - timedelta(hours=25))
    orphan = Path(settings.UPLOAD_DIR) / "left-by-a-crash.part"
    orphan.write_bytes(b"x")
    os.utime(orphan, (0, 0))
    start(admin, "new.gguf", len(model_bytes))
    assert list(Upload.objects.values_list("name", flat=True)) == ["new.gguf"]
    assert sorted(p.name for p in Path(settings.UPLOAD_DIR).iterdir()) == [f"{Upload.objects.get().pk}.part"]


def test_it_lets_only_lab_admins_upload(client, alice, bob, empty_folders):
    client.login(username="alice", password=PASSWORD)
    url = start(client, "m.gguf", 1000).json()["url"]
    client.login(username="bob", password=PASSWORD)
    assert start(client, "b.gguf", 1000).status_code == 403
    assert client.get(url).status_code == 403
    assert send(client, url, b"GGUF", 0).status_code == 403
    assert client.delete(url).status_code == 403
    assert Upload.objects.get().received == 0 and Upload.objects.count() == 1


def test_it_never_replaces_a_file_already_in_the_models_folder(admin, model_bytes):
    there = Path(settings.MODELS_DIR) / "m.gguf"
    there.parent.mkdir(parents=True)
    there.write_bytes(b"someone else's file")
    answer = send_all(admin, start(admin, "m.gguf", len(model_bytes)).json()["url"], model_bytes, CHUNK)
    assert answer.status_code == 422 and "already exists; upload the file again" in answer.json()["error"]
    assert there.read_bytes() == b"someone else's file"
    assert not Upload.objects.exists() and not GgufModel.objects.exists()
    assert not any(Path(settings.UPLOAD_DIR).iterdir())


def test_a_script_uploads_with_a_token_and_sees_the_model_in_the_library(alice, settings, empty_folders, model_bytes):
    """The API's door is the page's: a bearer token does what the Models page's uploader does."""
    settings.UPLOAD_CHUNK_BYTES = CHUNK
    script = Client(HTTP_AUTHORIZATION=f"Bearer {ApiToken.issue(alice, 'uploads')[1]}")
    started = start(script, "from-a-script.gguf", len(model_bytes), model_name="scripted")
    assert started.status_code == 201 and started.json()["chunk"] == CHUNK, started.content
    assert [u["id"] for u in script.get("/api/uploads/").json()["results"]] == [started.json()["id"]]
    done = send_all(script, started.json()["url"], model_bytes, CHUNK)
    assert done.status_code == 201 and done.json()["model"] == "scripted", done.content
    assert script.get("/api/models/scripted/").json()["layers"] == GgufModel.objects.get().n_layer
    assert script.get("/api/uploads/").json()["results"] == [] and not any(Path(settings.UPLOAD_DIR).iterdir())


def test_an_upload_is_its_owners_alone(client, alice, empty_folders):
    client.login(username="alice", password=PASSWORD)
    url = start(client, "m.gguf", 1000).json()["url"]
    other = User.objects.create_user("dana", "d@example.org", PASSWORD, role=Role.ADMIN)
    client.force_login(other)
    assert client.get(url).status_code == 404 and client.delete(url).status_code == 404
    assert send(client, url, b"GGUF", 0).status_code == 404 and client.get("/api/uploads/").json()["results"] == []
    assert Upload.objects.get().received == 0
