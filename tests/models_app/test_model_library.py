"""The model library: registered by path, checksummed in the background, nothing half-registered."""

import hashlib

import pytest
from django.core.management import call_command

from models_app.library.adding import LibraryError, ensure_bundled, register_path
from models_app.models import GgufModel, ModelStatus
from models_app.tasks import checksum
from tests.conftest import PASSWORD
from tests.models_app.gguf_files import write_gguf


def test_it_registers_the_bundled_model_once(db):
    first = ensure_bundled()
    assert first.bundled and first.n_layer == 30
    assert ensure_bundled().pk == first.pk
    assert GgufModel.objects.count() == 1


def test_it_checksums_a_registered_file_with_a_real_worker(tmp_path, celery_worker):
    path = write_gguf(tmp_path / "qwen.gguf")
    model = register_path(path, name="qwen-test")
    assert model.status == ModelStatus.HASHING
    import time

    deadline = time.monotonic() + 60
    while model.status == ModelStatus.HASHING and time.monotonic() < deadline:
        time.sleep(0.2)
        model.refresh_from_db()
    assert model.status == ModelStatus.READY and model.hash_progress == 1.0
    assert model.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("content, error", [
    (b"not a model at all", "not a GGUF file"),
    (b"GGUF" + bytes(2000), "damaged or truncated"),
])
def test_it_refuses_bad_files_and_keeps_nothing(tmp_path, db, content, error):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(content)
    with pytest.raises(LibraryError, match=error):
        register_path(bad)
    assert not GgufModel.objects.exists()
    assert bad.exists(), "the admin's file is left alone"


def test_it_refuses_the_same_file_or_name_twice(tmp_path, db):
    path = write_gguf(tmp_path / "one.gguf", big=False)
    register_path(path, name="one")
    with pytest.raises(LibraryError, match="already in the library"):
        register_path(path, name="other")
    with pytest.raises(LibraryError, match="already exists"):
        register_path(write_gguf(tmp_path / "two.gguf", big=False), name="one")
    assert GgufModel.objects.count() == 1


def test_it_shows_the_error_on_the_form_and_the_model_page(tmp_path, client, alice):
    client.login(username="alice", password=PASSWORD)
    missing = client.post("/models/", {"path": str(tmp_path / "nope.gguf")})
    assert b"There is no file at" in missing.content
    checksum_done = register_path(write_gguf(tmp_path / "m.gguf", big=False), name="m")
    checksum(checksum_done.pk)
    page = client.get("/models/m/")
    assert page.status_code == 200 and b"qwen2" in page.content and b"layer-data" in page.content
    assert b"Deployments of this model" in page.content and b"None yet" in page.content


def test_it_registers_by_command(tmp_path, db):
    call_command("addmodel", str(write_gguf(tmp_path / "cli.gguf", big=False)), "--name", "cli")
    assert GgufModel.objects.filter(name="cli").exists()
