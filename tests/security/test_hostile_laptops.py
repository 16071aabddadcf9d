"""Laptops with hostile user names, hosts and folders: refused in words at every door, and nothing runs.

A user name like `-oProxyCommand=touch /tmp/x` once reached `ssh -L` as `user@host` and ran its command on
the panel's machine (as root under `sudo make run`). Each hostile value here would create a marker file if
any shell or OpenSSH on the panel or the laptop ever ran it.
"""

import glob
import io
import subprocess
import uuid
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from nodes.models import Node
from nodes.pages.forms import sign_host_key
from nodes.remote import ssh

USER_RULE = "A user name holds only letters, digits"
HOST_RULE = "Enter an IP address or a host name"
FOLDER_RULE = "Use a folder under ~/ or an absolute path"


@pytest.fixture
def marker() -> str:
    """A file no test makes; a hostile value makes it (or `<marker>@<host>`, as ssh's ProxyCommand would)."""
    path = f"/tmp/pwned-{uuid.uuid4().hex[:10]}"  # short: a user name field holds 64 characters
    yield path
    for made in glob.glob(path + "*"):
        Path(made).unlink()


def ran(marker: str) -> list[str]:
    return glob.glob(marker + "*")


def hostile_users(marker: str) -> list[str]:
    return [f"-oProxyCommand=touch {marker}", f"-oLocalCommand=touch {marker}", f"lab;touch {marker}",
            f"$(touch {marker})", f"`touch {marker}`", f"lab\ntouch {marker}", f"lab -oProxyCommand=touch {marker}",
            f"lab|touch {marker}", "-lab"]


def hostile_hosts(marker: str, address: str) -> list[str]:
    return [f"-oProxyCommand=touch {marker}", f"-oLocalCommand=touch {marker}", f"{address};touch {marker}",
            f"$(touch {marker})", f"`touch {marker}`", f"{address}\ntouch {marker}",
            f"{address} -oProxyCommand=touch {marker}", f"{address}&&touch {marker}", "-lab", f"lab@{address}",
            f"fe80::1%$(touch {marker})", f"fe80::1%eth0\ntouch {marker}"]  # Python takes any IPv6 zone


def hostile_folders(marker: str) -> list[str]:
    return ["~/-rf", "~/x/--help", "~/../../etc", f"~/$(touch {marker})", f"~/`touch {marker}`",
            f"~/a;touch {marker}", "relative/folder", "~root/x", "/", "~/a b"]


# The values are refused before any connection, so no laptop is needed: an honest value elsewhere in the form
# points at this machine, where nothing answers on port 22.
ADDRESS = "127.0.0.1"
HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMOeun98x6IoOrAjcVNCpU+7J/tqKw5K23z/UaKwM3N9"


def add_form(**changes) -> dict:
    return {"name": "hostile", "host": ADDRESS, "port": 22, "username": "lab", "connection": "tunnel",
            "install_dir": "~/.clusterpanel", "auth": "panel_key", **changes}


def test_it_refuses_hostile_user_names_hosts_and_folders_in_the_add_laptop_form(client, alice, marker):
    client.force_login(alice)
    cases = [("username", value, USER_RULE) for value in hostile_users(marker)]
    cases += [("host", value, HOST_RULE) for value in hostile_hosts(marker, ADDRESS)]
    cases += [("install_dir", value, FOLDER_RULE) for value in hostile_folders(marker)]
    for field, value, rule in cases:
        first = client.post("/nodes/add/", add_form(**{field: value}))
        assert first.status_code == 200 and first.context["form"].errors.get(field), (field, value)
        assert rule in " ".join(first.context["form"].errors[field]) and rule in first.content.decode(), (field, value)
        assert "signed_host_key" not in first.content.decode(), "it never gets to the host key step"
        # The second step, posted directly with a genuinely signed host key, refuses the same values.
        second = client.post("/nodes/add/", {**add_form(**{field: value}), "signed_host_key": sign_host_key(HOST_KEY)})
        assert second.status_code == 200 and rule in second.content.decode(), (field, value)
        assert rule in " ".join(second.context["form"].errors[field]), (field, value)
    assert not Node.objects.exists()
    assert not ran(marker)


def addnode(*args: str) -> str:
    out = io.StringIO()
    call_command("addnode", *args, stdout=out, stdin=io.StringIO("not-the-password\n"))
    return out.getvalue()


def test_it_refuses_hostile_user_names_hosts_and_folders_in_addnode(db, marker, tmp_path):
    key = tmp_path / "key"
    key.write_text(ssh.generate_key_pair("test")[0])
    honest = {"--name": "hostile", "--host": ADDRESS, "--user": "lab", "--key-file": str(key), "--yes": None}
    cases = [("--user", value, USER_RULE) for value in hostile_users(marker)]
    cases += [("--host", value, HOST_RULE) for value in hostile_hosts(marker, ADDRESS)]
    cases += [("--install-dir", value, FOLDER_RULE) for value in hostile_folders(marker)]
    for option, value, rule in cases:
        options = {**honest, option: value}
        argv = [key if given is None else f"{key}={given}" for key, given in options.items()]  # "--user=-x"
        with pytest.raises(CommandError) as refused:
            addnode(*argv)
        assert "hostile was not registered" in str(refused.value) and rule in str(refused.value), (option, value)
    assert not Node.objects.exists()
    assert not ran(marker)


def test_it_lists_laptops_with_hostile_values_as_plain_text_in_the_api(db, client, alice, marker):
    """No API registers laptops yet (issue 15 adds one; it will run the same model validators, as the form and
    addnode do). A row written straight to the database, as one from before these checks could be, is listed
    without a crash and with its values as text."""
    values = {"host": f"-oProxyCommand=touch {marker}", "username": f"$(touch {marker})"}
    with pytest.raises(Exception) as refused:
        Node(name="legacy", host_key=HOST_KEY, **values).full_clean()
    assert HOST_RULE in str(refused.value) and USER_RULE in str(refused.value)
    Node.objects.create(name="legacy", host_key=HOST_KEY, **values)
    client.force_login(alice)
    answer = client.get("/api/nodes/")
    assert answer.status_code == 200
    assert [node["host"] for node in answer.json()["results"]] == [values["host"]]
    assert not ran(marker)


def test_it_refuses_to_open_a_tunnel_for_a_hostile_row_that_got_in_before_the_checks(db, marker):
    for field, value in (("username", f"-oProxyCommand=touch {marker}"), ("host", f"-oProxyCommand=touch {marker}")):
        node = Node.objects.create(name=f"legacy-{field}", **{"host": ADDRESS, "username": "lab", field: value},
                                   host_key=HOST_KEY)
        with pytest.raises(ssh.SSHError, match="Refusing to run ssh for this laptop") as refused:
            ssh.forward(node.ssh_target(), 50052, 1)
        assert refused.value.permanent
    assert not ran(marker)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_it_never_lets_ssh_read_a_user_or_host_as_an_option_even_past_validation(tmp_path, marker):
    """Defence in depth: the `ssh -L` command line itself, run by the real OpenSSH client with values that
    skipped every check. A closed port on 127.0.0.1 stands for the laptop: ssh runs a ProxyCommand before it
    connects, so a value read as an option would make the marker."""
    key, known = tmp_path / "key", tmp_path / "known_hosts"
    key.write_text(ssh.generate_key_pair("test")[0])
    key.chmod(0o600)
    known.write_text("")
    closed = free_port()
    targets = [ssh.SSHTarget(ADDRESS, value, HOST_KEY, closed) for value in hostile_users(marker)]
    targets += [ssh.SSHTarget(value, "lab", HOST_KEY, closed) for value in hostile_hosts(marker, ADDRESS)]
    for target in targets:
        argv = ssh.forward_argv(target, 50052, free_port(), key, known, timeout=3)
        finished = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
        assert not ran(marker), (target.username, target.host, finished.stderr)
        assert finished.returncode != 0, (target, finished.stderr)
        end = argv.index("--")
        assert argv[argv.index("-l") + 1] == target.username and argv.index("-l") < end
        assert argv[end + 1] == target.host, "the host comes only after --"
        assert argv[1:3] == ["-F", "/dev/null"], "no ssh_config can add a command that expands the host"


def test_it_gives_a_laptop_path_that_would_start_with_a_dash_a_dot_slash():
    """Paths reach the laptop's commands as arguments; one starting with '-' would be read as an option."""
    assert ssh.remote_path("~/-rf") == "./-rf"
    assert ssh.remote_path("-x/y") == "./-x/y"
    assert ssh.remote_path("~/.clusterpanel") == ".clusterpanel" and ssh.remote_path("/opt/cp") == "/opt/cp"
