"""An admin uploads a GGUF file from the models page: in chunks, through a dropped connection, resumed
after a reload, and refused with a clear reason (and nothing kept) when it is not a good model."""

import json
import os
from pathlib import Path

import pytest
from django.conf import settings
from playwright.sync_api import expect

from models_app.models import GgufModel, Upload
from tests.browser import browser_page, log_in
from tests.conftest import PASSWORD
from tests.models_app.gguf_files import write_gguf
from tests.models_app.uploading import assert_nothing_left

CHUNK = 256 << 10


@pytest.fixture
def panel(transactional_db, monkeypatch, request, empty_folders) -> str:
    """The served panel with small chunks, so a file of a few MB takes many."""
    monkeypatch.setenv("UPLOAD_CHUNK_BYTES", str(CHUNK))
    return request.getfixturevalue("web_server")


def watch_chunks(page, drop: int | None = None) -> list[tuple[int, int]]:
    """(offset, bytes) of every chunk the page sends, seen on its way to the panel; the connection
    carrying chunk number `drop` (from 0) is reset instead."""
    sent = []

    def on_the_way(route):
        if route.request.method != "PATCH":
            return route.continue_()
        sent.append((int(route.request.headers["upload-offset"]), len(route.request.post_data_buffer or b"")))
        return route.abort("connectionreset") if len(sent) - 1 == drop else route.continue_()

    page.route("**/api/uploads/*/", on_the_way)
    return sent


def pick_and_upload(page, base_url: str, path: Path, name: str = "") -> None:
    page.goto(f"{base_url}/models/")
    page.set_input_files("#upload-file", str(path))
    page.fill("#upload-name", name)
    page.click("#upload-start")


def test_it_uploads_a_model_in_chunks_through_a_dropped_connection(alice, panel, tmp_path):
    source = write_gguf(tmp_path / "Tiny Qwen.gguf", big=False)
    assert source.stat().st_size > 12 * CHUNK
    with browser_page() as page:
        log_in(page, panel, "alice", PASSWORD)
        sent = watch_chunks(page, drop=2)
        pick_and_upload(page, panel, source)
        page.wait_for_url(f"{panel}/models/tiny-qwen/", timeout=60_000)
        expect(page.locator(".flash")).to_contain_text("tiny-qwen uploaded and added")
        expect(page.locator(".facts").first).to_contain_text(
            "qwen2 · 4 layers (0–3), then the output layer · embedding 1024")
    assert sent[2] == sent[3] == (2 * CHUNK, CHUNK), "the dropped chunk was sent again"
    assert sum(size for _, size in sent) == source.stat().st_size + CHUNK
    model = GgufModel.objects.get()
    assert (model.name, model.architecture, model.n_layer, model.n_embd, model.n_head_kv, model.size) == (
        "tiny-qwen", "qwen2", 4, 1024, 2, source.stat().st_size)
    assert Path(model.path) == Path(settings.MODELS_DIR) / "tiny-qwen.gguf"
    assert Path(model.path).read_bytes() == source.read_bytes()
    assert not Upload.objects.exists() and not any(Path(settings.UPLOAD_DIR).iterdir())


def test_it_sends_only_the_rest_when_the_same_file_is_picked_again(alice, panel, tmp_path):
    source = write_gguf(tmp_path / "resume-me.gguf", big=False)
    os.utime(source, (1_700_000_000, 1_700_000_000))  # whole seconds: the browser's lastModified is in ms
    data, already = source.read_bytes(), 3 * CHUNK
    with browser_page() as page:
        log_in(page, panel, "alice", PASSWORD)
        upload = start_by_hand(page, panel, "resume-me.gguf", data, already)
        part = Path(settings.UPLOAD_DIR) / f"{upload['id']}.part"
        assert part.stat().st_size == already
        inode = part.stat().st_ino
        sent = watch_chunks(page)
        page.goto(f"{panel}/models/")
        percent = round(100 * already / len(data))
        expect(page.locator(".upload")).to_contain_text(f"Unfinished: resume-me.gguf ({percent}% of")
        pick_and_upload(page, panel, source, name="ignored-when-resuming")
        page.wait_for_url(f"{panel}/models/resume-me/", timeout=60_000)
    assert sent[0][0] == already, "it went on where the panel stood"
    assert sum(size for _, size in sent) == len(data) - already, "only the rest crossed the network"
    model = GgufModel.objects.get()
    assert Path(model.path).read_bytes() == data
    assert Path(model.path).stat().st_ino == inode, "the bytes that had arrived were kept, not written again"


def start_by_hand(page, base_url: str, name: str, data: bytes, until: int) -> dict:
    """An upload begun by an HTTP client in the browser's session and left unfinished, as a dropped tab leaves it."""
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    headers = {"X-CSRFToken": token, "Referer": f"{base_url}/models/"}
    answer = page.request.post(f"{base_url}/api/uploads/", headers={**headers, "Content-Type": "application/json"},
                               data=json.dumps({"name": name, "size": len(data), "modified": 1_700_000_000_000}))
    assert answer.status == 201, answer.text()
    upload = answer.json()
    for offset in range(0, until, CHUNK):
        sent = page.request.patch(f"{base_url}{upload['url']}", data=data[offset:offset + CHUNK], headers={
            **headers, "Upload-Offset": str(offset), "Content-Type": "application/octet-stream"})
        assert sent.json() == {"offset": offset + CHUNK}
    return upload


def garbage(path: Path) -> Path:
    path.write_bytes(os.urandom(3 * CHUNK))
    return path


def truncated(path: Path) -> Path:
    data = write_gguf(path, big=False).read_bytes()
    path.write_bytes(data[:len(data) * 2 // 3])
    return path


def png(path: Path) -> Path:
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(2 * CHUNK))
    return path


@pytest.mark.parametrize("make, error, chunks", [
    (garbage, "garbage.gguf is not a GGUF file", 1),
    (png, "photo.gguf is not a GGUF file: a model file begins with the letters GGUF, and this one is a PNG image", 1),
    (truncated, "truncated.gguf is damaged or truncated", None),
])
def test_it_refuses_what_is_not_a_good_model_and_keeps_nothing(alice, panel, tmp_path, make, error, chunks):
    bad = make(tmp_path / f"{make.__name__.replace('png', 'photo')}.gguf")
    with browser_page() as page:
        log_in(page, panel, "alice", PASSWORD)
        sent = watch_chunks(page)
        pick_and_upload(page, panel, bad)
        expect(page.locator("#upload-error")).to_contain_text(error, timeout=30_000)
        expect(page.locator("#upload-start")).to_be_visible()
    if chunks:
        assert len(sent) == chunks, "refused at the first chunk, not after the whole file"
    else:
        assert sum(size for _, size in sent) == bad.stat().st_size
    assert_nothing_left()
