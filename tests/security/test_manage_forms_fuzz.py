"""Generated hostile values at the forms that change or remove what exists — edit a laptop, manage people,
rename a conversation or a model — as a lab admin: no view answers 5xx; a form shows itself again with the
error, redirects, or refuses in words (409) what cannot be done now. The values and the checks are those of
tests/security/test_views_fuzz.py."""

from hypothesis import given
from hypothesis import strategies as st

from jobs.models import Conversation
from nodes.models import Node
from tests.security.test_views_fuzz import (  # noqa: F401 (clients_of_this_test: a fixture)
    EXAMPLES,
    PATH_IDS,
    TEXTS,
    form_shape,
    form_values,
    never_a_server_error,
    posted,
    signed_in,
)

HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJRvvesEHT9Lj/odiUekLSyxfHkxh+kIRGnuGyJVpB1/"
EDIT_NODE = {"name": "lab-1", "host": "10.0.0.1", "port": "22", "username": "lab", "connection": "tunnel",
             "install_dir": "~/.clusterpanel", "pipeline_order": "0", "usable_gb": "4", "reserve_gb": "1"}


@EXAMPLES
@given(values=form_values({**EDIT_NODE, "name": "lab-1"}))
def test_it_answers_the_edit_laptop_form(alice, values):
    """The address stays as it is unless changed, so no value makes the panel reach out beyond 10.0.0.1:22
    (nothing listens there: a change of address is refused with the reason)."""
    node, _ = Node.objects.get_or_create(name="lab-1", defaults={"host": "10.0.0.1", "username": "lab",
                                                                 "host_key": HOST_KEY})
    values = {**posted(values), "host": "10.0.0.1", "port": "22"}
    form_shape(signed_in(alice).post(f"/nodes/{node.name}/edit/", values))
    Node.objects.filter(pk=node.pk).update(name="lab-1")


@EXAMPLES
@given(username=TEXTS, role=TEXTS | st.sampled_from(["admin", "user"]), pk=PATH_IDS, action=st.sampled_from(
    ["role", "password", "disable", "enable"]))
def test_it_answers_the_users_forms(alice, username, role, pk, action):
    client = signed_in(alice)
    form_shape(client.post("/users/", posted({"username": username, "role": role})))
    answer = client.post(f"/users/{pk}/{action}/", posted({"role": role}))
    never_a_server_error(answer)
    assert answer.status_code in (200, 302, 400, 404, 409), answer.status_code


@EXAMPLES
@given(title=TEXTS, name=TEXTS)
def test_it_answers_the_rename_forms(alice, title, name):
    conversation, _ = Conversation.objects.get_or_create(user=alice, title="Mine")
    client = signed_in(alice)
    form_shape(client.post(f"/chat/{conversation.pk}/rename/", posted({"title": title})))
    Conversation.objects.filter(pk=conversation.pk).update(title="Mine")
    never_a_server_error(client.post("/models/no-such-model/rename/", posted({"name": name})))
