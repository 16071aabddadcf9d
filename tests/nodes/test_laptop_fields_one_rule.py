"""A laptop's name, address and user name are judged by one rule at every door — the Add and Edit forms, the
API's host-key scan, registration and PATCH, and addnode — which refuses in the same words everywhere and saves
nothing: a value is refused as sent, never cut to fit (a trailing newline), and never saved by one door that
another refuses (`user@host`, which then reached ssh as `user@host@host`)."""

import io

import pytest
import requests
from django.core.management import call_command
from django.core.management.base import CommandError

from clusterpanel.accounts.models import ApiToken
from nodes.models import Node
from nodes.remote import ssh
from tests.rows import HOST_KEY, client_for

ADDRESS = "127.0.0.1"  # nothing answers there: every value is refused before a connection is tried
CASES = [
    ("username", "lab\n", "The user name starts or ends with a space or a line break"),
    ("username", " lab", "The user name starts or ends with a space or a line break"),
    ("username", f"lab@{ADDRESS}", "not user@host"),
    ("host", f" {ADDRESS}", "The address starts or ends with a space or a line break"),
    ("host", f"{ADDRESS}\n", "The address starts or ends with a space or a line break"),
    ("host", "fe80::1%-oProxyCommand", "Enter an IP address or a host name"),
    ("name", "Add", "is taken by another page of the panel (/nodes/add/)"),
    ("name", "DOCTOR", "is taken by another page of the panel (/nodes/doctor/)"),
]
FIELDS = {"name": "hostile", "host": ADDRESS, "port": 22, "username": "lab", "connection": "tunnel",
          "install_dir": "~/.clusterpanel"}


@pytest.fixture
def laptop(transactional_db) -> Node:
    return Node.objects.create(name="lab-1", host="10.0.0.1", username="lab", host_key=HOST_KEY)


def by_the_add_form(alice, field: str, value: str) -> str:
    answer = client_for(alice).post("/nodes/add/", {**FIELDS, "auth": "panel_key", field: value})
    return " ".join(answer.context["form"].errors[field])


def by_the_edit_form(alice, field: str, value: str) -> str:
    data = {**FIELDS, "name": "lab-1", "host": "10.0.0.1", "pipeline_order": 0, "reserve_gb": 1, field: value}
    answer = client_for(alice).post("/nodes/lab-1/edit/", data)
    assert answer.status_code == 400
    return " ".join(answer.context["form"].errors[field])


def by_the_api(web_server: str, auth: dict, method: str, path: str, body: dict, field: str) -> str:
    answer = requests.request(method, f"{web_server}{path}", json=body, headers=auth, timeout=30)
    assert answer.status_code == 400 and answer.json()["field"] == field, answer.text
    return answer.json()["error"]


def by_addnode(field: str, value: str) -> str:
    option = {"name": "--name", "host": "--host", "username": "--user"}[field]
    options = {"--name": "hostile", "--host": ADDRESS, "--user": "lab", "--panel-key": None, "--yes": None,
               option: value}
    with pytest.raises(CommandError) as refused:
        call_command("addnode", *[k if v is None else f"{k}={v}" for k, v in options.items()], stdout=io.StringIO())
    return str(refused.value).removeprefix(f"{options['--name']} was not registered: {field}: ")


@pytest.mark.parametrize("field, value, words", CASES)
def test_every_door_refuses_the_value_in_the_same_words(web_server, alice, laptop, field, value, words):
    auth = {"Authorization": f"Bearer {ApiToken.issue(alice, 'script')[1]}"}
    register = {**FIELDS, "auth": "panel_key", "host_key_fingerprint": "SHA256:x", field: value}
    said = {"add form": by_the_add_form(alice, field, value), "edit form": by_the_edit_form(alice, field, value),
            "API register": by_the_api(web_server, auth, "POST", "/api/nodes/", register, field),
            "API PATCH": by_the_api(web_server, auth, "PATCH", "/api/nodes/lab-1/", {field: value}, field),
            "addnode": by_addnode(field, value)}
    if field == "host":
        said["API host key"] = by_the_api(web_server, auth, "POST", "/api/nodes/host-key/", {"host": value}, field)
    assert words in said["add form"], said
    assert len(set(said.values())) == 1, said
    assert list(Node.objects.values_list("name", "host", "username")) == [("lab-1", "10.0.0.1", "lab")]


def test_the_ssh_door_itself_refuses_what_the_fields_refuse():
    """A row saved before these rules never reaches ssh's command line either (nodes/remote/ssh.py checks again)."""
    for field, value, _ in CASES:
        if field in ("host", "username"):
            target = ssh.SSHTarget(**{"host": ADDRESS, "username": "lab", field: value}, host_key=HOST_KEY,
                                   private_key="key")
            with pytest.raises(ssh.SSHError, match="Refusing to run ssh"):
                ssh.forward(target, 50052, 1)


def test_a_domain_login_is_a_user_name_and_an_address_after_the_at_is_not():
    from nodes.remote import logins

    assert logins.user_problem("alice@corp") is None and logins.user_problem("alice@corp.example.org") is None
    assert "not user@host" in logins.user_problem("lab@10.0.0.5") and logins.user_problem("lab@fe80::1")
