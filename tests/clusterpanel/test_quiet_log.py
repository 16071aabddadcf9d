"""The panel's log at its default level says what happened, once: no paramiko traceback per failed SSH
attempt, no warning while Redis is still starting, one warning per Redis outage, page fetches only at DEBUG,
and a favicon where browsers look for one."""

import logging
import socket
import threading
from datetime import datetime

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from clusterpanel.kit import broadcast
from clusterpanel.web.webserver import DebugAccessLog
from nodes.remote import ssh
from tests.conftest import PASSWORD


class Layer:
    """A channel layer whose Redis is up or down as the test says."""

    def __init__(self) -> None:
        self.up = False

    async def group_send(self, group, message) -> None:
        if not self.up:
            raise RedisConnectionError("Connection refused")


@pytest.fixture
def layer(monkeypatch) -> Layer:
    fake = Layer()
    monkeypatch.setattr(broadcast, "get_channel_layer", lambda: fake)
    monkeypatch.setattr(broadcast.Reach, "reached", False)
    monkeypatch.setattr(broadcast.Reach, "down", False)
    return fake


def said(caplog, level=logging.INFO) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "clusterpanel.kit.broadcast" and r.levelno >= level]


def test_redis_still_starting_is_not_a_warning_and_an_outage_is_said_once(layer, caplog):
    caplog.set_level(logging.DEBUG, logger="clusterpanel.kit.broadcast")
    for _ in range(3):
        broadcast.broadcast("dashboard", "dashboard.metrics", {})
    assert said(caplog) == [] and len(said(caplog, logging.DEBUG)) == 3
    layer.up = True
    broadcast.broadcast("dashboard", "dashboard.metrics", {})
    layer.up = False
    for _ in range(5):
        broadcast.broadcast("dashboard", "dashboard.metrics", {})
    warnings = said(caplog, logging.WARNING)
    assert len(warnings) == 1 and "said once until Redis answers again" in warnings[0]
    layer.up = True
    broadcast.broadcast("dashboard", "dashboard.metrics", {})
    assert said(caplog)[-1] == "telling browsers works again"


def test_a_failed_ssh_handshake_logs_no_paramiko_traceback(caplog):
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def answer_garbage() -> None:
        connection, _ = listener.accept()
        connection.sendall(b"not ssh\r\n" * 3)
        connection.close()

    thread = threading.Thread(target=answer_garbage, daemon=True)
    thread.start()
    with pytest.raises(ssh.SSHError):
        ssh.host_key_of("127.0.0.1", port, timeout=5)
    thread.join(5)
    listener.close()
    assert [r for r in caplog.records if r.name.startswith("paramiko")] == []


def test_page_fetches_are_logged_at_debug_only(caplog):
    caplog.set_level(logging.DEBUG, logger="clusterpanel.access")
    DebugAccessLog().write_entry("127.0.0.1:5000", datetime.now(), "GET /nodes/", 200, 512)
    records = [r for r in caplog.records if r.name == "clusterpanel.access"]
    assert [(r.levelno, r.getMessage()) for r in records] == [(logging.DEBUG, '127.0.0.1:5000 "GET /nodes/" 200 512')]


def test_the_favicon_is_where_browsers_look(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"].endswith(".svg")


def test_a_refusal_is_one_line_without_its_traceback(client, bob, caplog):
    client.login(username="bob", password=PASSWORD)
    assert client.get("/nodes/").status_code == 403
    refused = [r for r in caplog.records if r.name == "django.request" and r.levelno == logging.WARNING]
    assert [r.getMessage() for r in refused] == ["Forbidden (Permission denied): /nodes/"]
    assert "\n" not in logging.Formatter().format(refused[0])
