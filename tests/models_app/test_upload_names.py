"""A browser's file name is shown and suggests the model's name; it never becomes a path."""

from pathlib import Path

import pytest

from models_app.models import GgufModel
from tests.conftest import PASSWORD
from tests.models_app.gguf_files import write_gguf
from tests.models_app.uploading import files_under, send_all, start

HOSTILE = [
    ("../../etc/passwd.gguf", "", "passwd"),
    ("/etc/cron.d/evil.gguf", "", "evil"),
    ("..\\..\\windows\\win.gguf", "", "win"),
    ("nul\x00byte.gguf", "", "nulbyte"),
    ("model.gguf", "../../../../tmp/escape", "tmpescape"),
]


@pytest.mark.parametrize("name, model_name, slug", HOSTILE)
def test_it_stores_files_under_names_it_chose(client, alice, settings, empty_folders, tmp_path, name, model_name,
                                              slug):
    settings.UPLOAD_CHUNK_BYTES = 64 << 10
    data = write_gguf(tmp_path / "m.gguf", big=False, embd=64).read_bytes()
    client.login(username="alice", password=PASSWORD)
    started = start(client, name, len(data), model_name=model_name)
    assert started.status_code == 201, started.json()
    assert "\x00" not in started.json()["name"]
    part = Path(settings.UPLOAD_DIR) / f"{started.json()['id']}.part"
    assert files_under(Path(settings.UPLOAD_DIR)) == [part]
    assert send_all(client, started.json()["url"], data, 64 << 10).status_code == 201
    model = GgufModel.objects.get()
    assert model.name == slug
    assert Path(model.path) == Path(settings.MODELS_DIR) / f"{model.name}.gguf"
    assert files_under(Path(settings.DATA_DIR) / "models") == [Path(model.path)]
    assert files_under(Path(settings.UPLOAD_DIR)) == []
    for base in (Path(settings.UPLOAD_DIR), Path(settings.MODELS_DIR)):
        for hostile in (name.replace("\x00", ""), f"{model_name}.gguf"):
            target = (base / hostile).resolve()
            assert base in target.parents or not target.exists(), f"something was written at {target}"


def test_it_refuses_a_name_with_nothing_to_make_a_slug_of(client, alice, empty_folders):
    client.login(username="alice", password=PASSWORD)
    answer = start(client, "../../.gguf", 1000)
    assert answer.status_code == 422 and "made of letters, digits or hyphens" in answer.json()["error"]
