"""Private keys and passwords never sit in the database in clear."""

import io
import subprocess
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.db import connection

from nodes.models import Node, PanelKey


def database_bytes() -> bytes:
    """The database file and its write-ahead log, read by another process: closing any file descriptor on the
    database in this process would drop every SQLite lock this process holds on it, and another process could
    then delete the log under this process's open connections (the next test's writes failed with "disk I/O
    error")."""
    name = settings.DATABASES["default"]["NAME"]
    files = [path for path in (name, f"{name}-wal") if Path(path).exists()]
    return subprocess.run(["cat", *files], check=True, capture_output=True).stdout


def test_it_keeps_no_private_key_in_clear_in_the_database_file(lan, transactional_db):
    the_lan = lan(3)
    laptop = the_lan.laptops[0]
    key_text = Path(the_lan.key_path).read_text()
    Node.objects.create(name="n1", host=laptop.address, username=laptop.user, host_key=laptop.host_key,
                        private_key=key_text)
    panel_private = PanelKey.get().private_key
    other = the_lan.laptops[1]
    call_command("addnode", "--name", "n2", "--host", other.address, "--user", other.user, "--password",
                 "--fingerprint", other.host_key_fingerprint, stdin=io.StringIO(other.password + "\n"),
                 stdout=io.StringIO())
    connection.close()
    raw = database_bytes()
    assert other.password.encode() not in raw
    for secret in (key_text, panel_private):
        body = "".join(secret.strip().splitlines()[1:-1])
        assert body[:40].encode() not in raw
        assert b"PRIVATE KEY" not in raw
    assert Node.objects.get(name="n1").private_key == key_text, "the panel itself can still read it"


def test_it_never_sends_a_private_key_back_to_the_browser(lan, client, alice):
    from nodes.pages.forms import sign_host_key

    the_lan = lan(3)
    laptop = the_lan.laptops[0]
    key_text = Path(the_lan.key_path).read_text()
    client.login(username="alice", password="correct horse battery staple")
    page = client.post("/nodes/add/", {
        "name": "bad name with spaces", "host": laptop.address, "port": 22, "username": laptop.user,
        "connection": "tunnel", "auth": "private_key", "signed_host_key": sign_host_key(laptop.host_key),
        "private_key": key_text,
    })
    assert page.status_code == 200 and b"letters, numbers" in page.content, "it says what is wrong"
    body = "".join(key_text.strip().splitlines()[1:-1])
    assert body[:40].encode() not in page.content
