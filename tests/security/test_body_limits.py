"""Request bodies are refused by size before the web server reads them, anonymous callers' most of all.

Through the panel's real web server: a caller announces (or streams) far more than it may send, and the test
counts what the server let it send, how long the 413 took and how much the server process grew. The bodies
the panel lives on (a model upload's chunk, a batch file, a /v1 request) still go through whole.
"""

import json
import re
import select
import socket
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests
from django.conf import settings

from clusterpanel.accounts.models import ApiToken
from clusterpanel.web.bodylimits import FORM_ROOM, limit_for
from clusterpanel.web.webserver import route_name
from tests.conftest import PASSWORD

HUGE = 200 << 20
BLOCK = 64 << 10
# What a client can push into the two sockets' buffers on loopback before anyone reads: far less than HUGE.
LITTLE = 16 << 20


def server_pid(url: str) -> int:
    """The web server's process: the one whose command line listens on the URL's port."""
    port = str(urlsplit(url).port)
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"clusterpanel.web.webserver" in argv or b"daphne" in argv:
            if port.encode() in argv:
                return int(entry.name)
    raise AssertionError(f"no web server on port {port}")


def rss(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) << 10


def push(url: str, head: str, blocks, total: int) -> tuple[int, float, bytes]:
    """Sends `head`, then blocks of body until the server answers, stops taking them or `total` is sent:
    (bytes of body sent, seconds until the answer, the answer)."""
    address = urlsplit(url)
    with socket.create_connection((address.hostname, address.port), timeout=30) as sock:
        sock.sendall(head.encode())
        started, sent = time.monotonic(), 0
        try:
            for block in blocks:
                if sent >= total or select.select([sock], [], [], 0)[0]:
                    break
                sock.sendall(block)
                sent += len(block)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server closed the connection: it will take no more
        return sent, time.monotonic() - started, answer(sock)


def answer(sock: socket.socket) -> bytes:
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except (ConnectionResetError, TimeoutError):
        pass
    return received


def plain(length: int):
    while True:
        yield b"x" * BLOCK


def chunked(length: int):
    while True:
        yield f"{BLOCK:x}\r\n".encode() + b"x" * BLOCK + b"\r\n"


def request_head(method: str, path: str, headers: dict[str, str]) -> str:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", *(f"{k}: {v}" for k, v in headers.items())]
    return "\r\n".join(lines) + "\r\n\r\n"


def status_and_body(raw: bytes) -> tuple[int | None, bytes]:
    if not raw.startswith(b"HTTP/1.1 "):
        return None, raw
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head[9:12]), body


def warmed(url: str) -> int:
    """The server's pid, after the requests that make it load the views a refusal could touch."""
    requests.get(f"{url}/login/", timeout=30)
    requests.post(f"{url}/v1/chat/completions", json={"messages": []}, timeout=30)
    return server_pid(url)


def test_it_refuses_an_anonymous_200_mib_body_without_reading_it(web_server):
    pid = warmed(web_server)
    before = rss(pid)
    head = request_head("POST", "/v1/chat/completions", {"Content-Type": "application/json",
                                                          "Content-Length": str(HUGE)})
    sent, seconds, raw = push(web_server, head, plain(HUGE), HUGE)
    grown = rss(pid) - before
    status, body = status_and_body(raw)
    print(f"anonymous 200 MiB: sent {sent >> 10} KiB, answered in {seconds:.3f} s, server grew {grown >> 10} KiB")
    assert sent < LITTLE, f"the server took {sent >> 20} MiB of a body it was going to refuse"
    assert status == 413 and seconds < 2, (status, seconds, raw[:300])
    error = json.loads(body)["error"]
    assert error["type"] == "invalid_request_error" and "without logging in or an API token" in error["message"]
    assert grown < 8 << 20, f"the web server grew {grown >> 20} MiB"


def test_it_refuses_an_anonymous_chunked_body_once_it_passes_the_limit(web_server):
    head = request_head("POST", "/login/", {"Transfer-Encoding": "chunked"})
    sent, seconds, raw = push(web_server, head, chunked(HUGE), 64 << 20)
    status, body = status_and_body(raw)
    assert sent < LITTLE and status == 413 and seconds < 2, (sent, status, seconds, raw[:300])
    assert body.decode().startswith("The request body is more than 64 KiB")


def test_it_refuses_a_body_over_its_route_limit_whatever_credentials_are_shown(web_server):
    """A token or cookie is not checked before the body (that needs the database): one made up gets no more."""
    head = request_head("POST", "/api/jobs/", {"Authorization": "Bearer made-up", "Content-Length": str(HUGE)})
    sent, seconds, raw = push(web_server, head, plain(HUGE), HUGE)
    status, body = status_and_body(raw)
    assert sent < LITTLE and status == 413 and seconds < 2, (sent, status, seconds, raw[:300])
    assert json.loads(body) == {"error": "The request body is 200 MiB; the panel takes at most 4 MiB here.",
                                "field": None}

    path = "/api/uploads/00000000-0000-0000-0000-000000000000/"
    over = settings.UPLOAD_CHUNK_BYTES + 1
    head = request_head("PATCH", path, {"Cookie": "sessionid=made-up", "Content-Length": str(over)})
    sent, seconds, raw = push(web_server, head, plain(over), over)
    assert status_and_body(raw)[0] == 413 and seconds < 2 and sent < LITTLE


@pytest.fixture
def admin_session(web_server, alice) -> requests.Session:
    session = requests.Session()
    session.get(f"{web_server}/login/", timeout=30)
    done = session.post(f"{web_server}/login/", timeout=30, data={
        "username": "alice", "password": PASSWORD, "csrfmiddlewaretoken": session.cookies["csrftoken"]})
    assert done.ok and not done.url.endswith("/login/")
    session.headers["X-CSRFToken"] = session.cookies["csrftoken"]
    return session


def test_it_takes_a_model_upload_chunk_of_the_full_size(web_server, admin_session):
    chunk = b"GGUF" + (3).to_bytes(4, "little") + bytes(settings.UPLOAD_CHUNK_BYTES - 8)
    started = admin_session.post(f"{web_server}/api/uploads/", timeout=30, json={
        "name": "big.gguf", "size": 2 * len(chunk), "modified": 1})
    assert started.status_code == 201, started.text
    url = f"{web_server}{started.json()['url']}"
    try:
        sent = admin_session.patch(url, data=chunk, timeout=60, headers={
            "Upload-Offset": "0", "Content-Type": "application/octet-stream"})
        assert sent.status_code == 200 and sent.json() == {"offset": len(chunk)}, sent.text
    finally:
        admin_session.delete(url, timeout=30)


def test_it_takes_a_batch_file_of_the_full_size(web_server, admin_session):
    line = b'{"custom_id": "a", "body": {"messages": [{"role": "user", "content": "hi"}]}}\n'
    whole = line * (settings.BATCH_MAX_BYTES // len(line))
    whole += b" " * (settings.BATCH_MAX_BYTES - len(whole))
    page = admin_session.post(f"{web_server}/jobs/batches/", timeout=60, files={"file": ("b.jsonl", whole)},
                              data={"deployment": "1", "csrfmiddlewaretoken": admin_session.cookies["csrftoken"]})
    assert page.status_code == 400 and "text/html" in page.headers["Content-Type"], page.text[:300]
    assert "a batch file may be at most" not in page.text, "the file arrived whole and within the limit"
    assert "Select a valid choice" in page.text, "the form was read (no deployment is ready here)"


def test_it_takes_a_v1_body_as_large_as_django_takes(web_server, bob):
    """The server's limit for JSON and Django's DATA_UPLOAD_MAX_MEMORY_SIZE are one: at the limit, the
    request reaches the view; one byte more, the server refuses it before reading."""
    auth = {"Authorization": f"Bearer {ApiToken.issue(bob, 'tests')[1]}", "Content-Type": "application/json"}
    body = json.dumps({"messages": [{"role": "user", "content": ""}]}).encode()
    body = body.replace(b'""', b'"' + b"a" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE - len(body)) + b'"')
    assert len(body) == settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    reached = requests.post(f"{web_server}/v1/chat/completions", data=body, headers=auth, timeout=60)
    assert reached.status_code == 503 and "No deployment is ready" in reached.json()["error"]["message"], \
        reached.text[:300]
    head = request_head("POST", "/v1/chat/completions", {**auth, "Content-Length": str(len(body) + 1)})
    sent, seconds, raw = push(web_server, head, [body + b"a"], len(body) + 1)
    assert status_and_body(raw)[0] == 413, raw[:300]


def test_it_sizes_the_limit_by_caller_and_route():
    assert route_name(b"/api/uploads/00000000-0000-0000-0000-000000000000/?x=1") == "api:upload"
    assert route_name(b"/jobs/batches/") == "batches:list" and route_name(b"/no/such/page/") is None
    for route in ("api:upload", "batches:list", "openai-chat"):
        assert limit_for(False, lambda: route) == settings.BODY_MAX_ANONYMOUS_BYTES == 64 << 10  # noqa: B023
    assert limit_for(True, lambda: "api:upload") == settings.UPLOAD_CHUNK_BYTES
    assert limit_for(True, lambda: "batches:list") == settings.BATCH_MAX_BYTES + FORM_ROOM
    assert limit_for(True, lambda: "openai-chat") == settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    for door in (b"/api/batches/", b"/v1/files"):  # a batch file by script takes what the page's form does
        assert limit_for(True, lambda: route_name(door)) == settings.BATCH_MAX_BYTES + FORM_ROOM  # noqa: B023


def test_it_finds_the_route_django_will_and_no_route_for_odd_targets():
    """The route of a request target is looked up as daphne hands the path to Django: a target that is not a
    path raised out of Twisted's parser (the connection dropped with a logged traceback), and `//host/...`
    or an absolute URL found the batch route, whose limit is larger, though Django sends them elsewhere."""
    assert route_name(b"/jobs/batches/?page=2") == "batches:list"
    assert route_name(b"/jobs/%62atches/") == "batches:list"
    for odd in (b"http://[x", b"//evil/jobs/batches/", b"http://evil/jobs/batches/", b"*"):
        assert route_name(odd) is None, odd
