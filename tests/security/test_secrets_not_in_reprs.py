"""A laptop's private key and password never show in a repr, a log line or a DEBUG error page."""

import io
import logging
import pprint
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings

from nodes.models import Node, PanelKey
from nodes.pages.forms import sign_host_key
from nodes.remote import ssh

PASSWORD = "hunter2-never-shown"
HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMOeun98x6IoOrAjcVNCpU+7J/tqKw5K23z/UaKwM3N9"


def key_body(private_key: str) -> str:
    """A stretch of the key's base64, which would show however the key was printed."""
    return "".join(private_key.strip().splitlines()[1:-1])[:40]


def assert_no_secret(text: str, *secrets: str) -> None:
    for secret in secrets:
        assert secret not in text, f"a secret ({secret[:6]}...) shows in: {text[:300]}"


def test_it_keeps_the_key_and_password_out_of_reprs_and_log_lines(db, caplog):
    private = ssh.generate_key_pair("test")[0]
    target = ssh.SSHTarget("10.232.0.9", "lab", HOST_KEY, 22, private_key=private, password=PASSWORD)
    node = Node(name="lab-1", host="10.232.0.9", username="lab", host_key=HOST_KEY, private_key=private)
    caplog.set_level(logging.DEBUG)
    logging.getLogger("nodes").debug("target %s, %r; node %s, %r", target, target, node, node)
    shown = [repr(target), str(target), f"{target}", pprint.pformat({target: node}), repr(node), str(node),
             repr(node.ssh_target()), repr([target]), caplog.text]
    for text in shown:
        assert_no_secret(text, PASSWORD, key_body(private), "PRIVATE KEY")
    assert "10.232.0.9" in repr(target) and "lab" in repr(target), "what is not secret still helps debugging"


def test_it_logs_no_secret_while_registering_and_tunnelling_on_the_lan(lan, db, caplog):
    the_lan = lan(3)
    laptop, other = the_lan.laptops[:2]
    caplog.set_level(logging.DEBUG)  # paramiko's and the panel's own debug lines too
    out = io.StringIO()
    with pytest.raises(CommandError) as refused:
        call_command("addnode", "--name", "wrong", "--host", laptop.address, "--user", laptop.user, "--password",
                     "--fingerprint", laptop.host_key_fingerprint, stdin=io.StringIO(PASSWORD + "\n"), stdout=out)
    call_command("addnode", "--name", "by-password", "--host", other.address, "--user", other.user, "--password",
                 "--fingerprint", other.host_key_fingerprint, stdin=io.StringIO(other.password + "\n"), stdout=out)
    node = Node.objects.get(name="by-password")
    tunnel = ssh.forward(node.ssh_target(), 22, free_port())
    tunnel.close()
    recorded = [str(refused.value), out.getvalue(), caplog.text, node.status_detail,
                *(f"{action.message} {action.error}" for action in node.actions.all())]
    assert "by-password" in out.getvalue() and node.actions.exists(), "it did register and probe"
    secrets = (PASSWORD, other.password, key_body(PanelKey.get().private_key),
               key_body(Path(the_lan.key_path).read_text()), "PRIVATE KEY")
    for text in recorded:
        assert_no_secret(text, *secrets)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def confirm_form(**changes) -> dict:
    return {"name": "lab-1", "host": "10.232.0.9", "port": 22, "username": "lab", "connection": "tunnel",
            "install_dir": "~/.clusterpanel", "signed_host_key": sign_host_key(HOST_KEY), **changes}


@override_settings(DEBUG=True)
def test_it_shows_no_secret_on_a_debug_error_page_while_adding_a_laptop(client, alice, monkeypatch):
    """A crash deep in the SSH door while a laptop is added (the connection here is made to fail unexpectedly):
    the DEBUG page lists the request's POST and every frame's variables, and must show neither secret."""
    def crash(target):
        raise RuntimeError("unexpected failure in the SSH door")

    monkeypatch.setattr(ssh, "pooled", crash)
    client.raise_request_exception = False
    client.force_login(alice)
    private = ssh.generate_key_pair("test")[0]
    for auth in ({"auth": "password", "password": PASSWORD}, {"auth": "private_key", "private_key": private}):
        page = client.post("/nodes/add/", confirm_form(**auth))
        assert page.status_code == 500 and b"unexpected failure in the SSH door" in page.content, "a DEBUG page"
        assert b"install_panel_key" in page.content or b"check_login" in page.content, "with the frames"
        assert_no_secret(page.content.decode(), PASSWORD, key_body(private), "PRIVATE KEY")
    assert not Node.objects.exists()
