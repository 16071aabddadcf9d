"""Speaking the upload protocol from a test, and checking that nothing was left behind."""

import json
from pathlib import Path

from django.conf import settings

from models_app.models import GgufModel, Upload


def start(client, name: str, size: int, modified: int = 1_700_000_000_000, model_name: str = ""):
    return client.post("/api/uploads/", json.dumps(
        {"name": name, "size": size, "modified": modified, "model_name": model_name}), content_type="application/json")


def send(client, url: str, chunk: bytes, offset: int):
    return client.patch(url, chunk, content_type="application/octet-stream", headers={"Upload-Offset": str(offset)})


def send_all(client, url: str, data: bytes, chunk: int, offset: int = 0):
    """Every chunk from `offset` on; the last answer."""
    while True:
        answer = send(client, url, data[offset:offset + chunk], offset)
        if answer.status_code != 200:
            return answer
        offset = answer.json()["offset"]


def files_under(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def assert_nothing_left() -> None:
    assert not Upload.objects.exists(), "no upload row"
    assert not GgufModel.objects.exists(), "no model row"
    assert files_under(Path(settings.UPLOAD_DIR)) == [], "no part file"
    assert files_under(Path(settings.MODELS_DIR)) == [], "no model file"
