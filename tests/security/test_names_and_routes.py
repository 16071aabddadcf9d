"""A laptop or model whose name is another page's (/nodes/add/, /models/plan/) would have a page nobody can
reach: such names are refused in words at every door, found from the routes themselves."""

import io

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.http import HttpResponse
from django.test import override_settings
from django.urls import include, path

import nodes.urls
from models_app.models import GgufModel
from nodes.models import Node
from tests.models_app.gguf_files import write_gguf

TAKEN = "is taken by another page of the panel"


def add_form(name: str) -> dict:
    return {"name": name, "host": "10.232.0.9", "port": 22, "username": "lab", "connection": "tunnel",
            "install_dir": "~/.clusterpanel", "auth": "panel_key"}


def test_it_refuses_laptop_names_that_are_pages_in_the_add_laptop_form(client, alice):
    client.force_login(alice)
    for name in ("add", "doctor"):
        page = client.post("/nodes/add/", add_form(name))
        assert page.status_code == 200
        assert f"The name {name} {TAKEN} (/nodes/{name}/)" in " ".join(page.context["form"].errors["name"])
    assert not Node.objects.exists()


def test_it_refuses_laptop_names_that_are_pages_in_addnode(db):
    for name in ("add", "doctor"):
        with pytest.raises(CommandError, match=f"{name} was not registered: name: The name {name} {TAKEN}"):
            call_command("addnode", "--name", name, "--host", "10.232.0.9", "--user", "lab", "--panel-key",
                         "--yes", stdout=io.StringIO())
    assert not Node.objects.exists()


def test_it_lets_through_names_whose_page_is_their_own(db):
    """/nodes/metrics/ is the laptop "metrics"' page (the metrics route is recent.json), so the name is fine."""
    for name in ("metrics", "lab-3", "new", "doctors"):
        Node(name=name, host="10.232.0.9", username="lab", host_key="ssh-ed25519 AAAA").full_clean()
    for name in ("new", "smollm2", "planner", "uploads"):  # uploads: the upload protocol moved to /api/uploads/
        GgufModel._meta.get_field("name").run_validators(name)


def test_it_refuses_model_names_that_are_pages_in_addmodel(db, tmp_path):
    gguf = write_gguf(tmp_path / "plan.gguf", big=False)
    for name in ("plan", "deployments"):
        with pytest.raises(CommandError, match=f"The name {name} {TAKEN} \\(/models/{name}/\\)"):
            call_command("addmodel", str(gguf), "--name", name, stdout=io.StringIO())
    with pytest.raises(CommandError, match=f"The name plan {TAKEN}"):
        call_command("addmodel", str(gguf), stdout=io.StringIO())  # named after the file
    assert not GgufModel.objects.exists()


def test_it_refuses_model_names_that_are_pages_on_the_model_itself(db):
    for name in ("plan", "deployments"):
        with pytest.raises(ValidationError, match=f"/models/{name}/"):
            GgufModel._meta.get_field("name").run_validators(name)


def fleet(request) -> HttpResponse:
    return HttpResponse("fleet")


urlpatterns = [
    path("nodes/", include(([path("fleet/", fleet, name="fleet"), *nodes.urls.urlpatterns], "nodes"))),
    path("models/", include("models_app.urls")),
]


def test_it_refuses_the_name_of_a_page_added_later_without_a_list_to_update(db):
    Node(name="fleet", host="10.232.0.9", username="lab", host_key="ssh-ed25519 AAAA").full_clean()
    with override_settings(ROOT_URLCONF=__name__):
        with pytest.raises(ValidationError, match=f"The name fleet {TAKEN} \\(/nodes/fleet/\\)"):
            Node(name="fleet", host="10.232.0.9", username="lab", host_key="ssh-ed25519 AAAA").full_clean()
