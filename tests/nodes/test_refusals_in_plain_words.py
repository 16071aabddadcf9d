"""A laptop that cannot be reached, or a file that is no model, is refused in words an admin acts on, never
Python's `[Errno 113] No route to host` or "starts with b'\\xa8^\\xeb\\xef'"."""

import errno
import socket

import pytest

from models_app.gguf.meta import GGUFError, check_header
from nodes.remote import ssh
from tests.conftest import free_port


@pytest.mark.parametrize("error, words", [
    (OSError(errno.EHOSTUNREACH, "No route to host"), "no route to it. Is the laptop switched on"),
    (socket.gaierror(-2, "Name or service not known"), "does not resolve"),
    (OSError(errno.ECONNREFUSED, "Connection refused"), "nothing listens on that port"),
    (TimeoutError("timed out"), "it did not answer"),
])
def test_it_says_why_a_laptop_cannot_be_reached(error, words):
    said = ssh.why_unreachable(error)
    assert words in said and "Errno" not in said


def test_it_says_so_when_nothing_listens_on_the_port():
    with pytest.raises(ssh.SSHError) as refused:
        ssh.host_key_of("127.0.0.1", free_port(), timeout=5)
    assert str(refused.value).startswith("Cannot reach 127.0.0.1:")
    assert "nothing listens on that port" in str(refused.value) and "Errno" not in str(refused.value)


def test_it_says_so_when_the_name_does_not_resolve():
    with pytest.raises(ssh.SSHError) as refused:
        ssh.host_key_of("no-such-laptop.invalid", timeout=5)
    assert "does not resolve" in str(refused.value) and "Errno" not in str(refused.value)


@pytest.mark.parametrize("head, words", [
    (b"\xa8^\xeb\xef\x00\x01\x02\x03", "begins with the bytes a8 5e eb ef"),
    (b"\x89PNG\r\n\x1a\n", "is a PNG image"),
    (b"version https://git-lfs.github.com/spec/v1"[:8], "is a Git LFS pointer"),
])
def test_it_says_what_a_file_that_is_no_model_is(head, words):
    with pytest.raises(GGUFError) as refused:
        check_header(head, "upload.gguf")
    said = str(refused.value)
    assert said.startswith("upload.gguf is not a GGUF file: a model file begins with the letters GGUF")
    assert words in said and "b'" not in said
