"""scripts/upload-model, the documented way to upload a model from another machine, run with curl against the
real web server: it uploads a model; run again after an upload stopped part way, it goes on from the panel's
offset; when every byte had arrived it finishes the upload; a refused file ends it with the panel's words."""

import os
import subprocess
from pathlib import Path

from clusterpanel.accounts.models import ApiToken
from models_app.models import GgufModel, Upload
from tests.models_app.gguf_files import write_gguf
from tests.models_app.uploading import assert_nothing_left, send, start

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "upload-model"


def upload(panel: str, token: str, *args: str) -> subprocess.CompletedProcess:
    env = {"PANEL": panel, "TOKEN": token, "PATH": os.environ["PATH"]}
    return subprocess.run([str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=120)


def started_part_way(client, token: str, model: Path, sent: int) -> None:
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    url = start(client, model.name, model.stat().st_size, modified=int(model.stat().st_mtime) * 1000).json()["url"]
    assert send(client, url, model.read_bytes()[:sent], 0).json() == {"offset": sent}


def test_it_uploads_a_model_and_resumes_one_stopped_part_way(web_server, alice, tmp_path, empty_folders, client):
    model = write_gguf(tmp_path / "model.gguf", big=False, embd=128)
    token = ApiToken.issue(alice, "script")[1]
    started_part_way(client, token, model, 1000)

    done = upload(web_server, token, str(model))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Added model: /models/model/"
    added = GgufModel.objects.get(name="model")
    assert Path(added.path).read_bytes() == model.read_bytes(), "the part sent before, then the rest"
    assert not Upload.objects.exists()


def test_it_finishes_an_upload_whose_every_byte_had_arrived(web_server, alice, tmp_path, empty_folders, client):
    model = write_gguf(tmp_path / "whole.gguf", big=False, embd=128)
    token = ApiToken.issue(alice, "script")[1]
    started_part_way(client, token, model, model.stat().st_size - 1)
    with Upload.objects.get().part_path.open("ab") as part:  # its last byte written, then the panel stopped
        part.write(model.read_bytes()[-1:])
    done = upload(web_server, token, str(model))
    assert done.returncode == 0, done.stderr
    assert GgufModel.objects.filter(name="whole").exists()


def test_it_stops_with_the_panels_words_when_refused(web_server, alice, bob, tmp_path, empty_folders):
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a model at all" * 100)
    done = upload(web_server, ApiToken.issue(alice, "script")[1], str(junk))
    assert done.returncode == 1 and "The panel refused the chunk" in done.stderr and "GGUF" in done.stderr
    assert_nothing_left()

    denied = upload(web_server, ApiToken.issue(bob, "script")[1], str(junk))
    assert denied.returncode == 1 and "Only lab admins can upload models." in denied.stderr
