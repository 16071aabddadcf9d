"""A form's address opened as a page (logged out in another tab, logged in again, and led back to where the
form was sent) goes to the page the form is on, saying nothing was done, not to the browser's own
"HTTP ERROR 405" for an empty answer. Scripts still get their 405."""

from jobs.models import Conversation
from tests.conftest import PASSWORD


def test_it_leads_a_stale_form_back_to_its_page_after_logging_in_again(client, bob):
    conversation = Conversation.objects.create(user=bob, title="Plans")
    rename = f"/chat/{conversation.pk}/rename/"
    assert client.get(rename)["Location"] == f"/login/?next={rename}"
    response = client.post(f"/login/?next={rename}", {"username": "bob", "password": PASSWORD, "next": rename},
                           follow=True)
    assert response.redirect_chain[-1] == (f"/chat/{conversation.pk}/", 302)
    page = response.content.decode()
    assert "nothing was done" in page and "Plans" in page
    conversation.refresh_from_db()
    assert conversation.title == "Plans"


def test_it_leads_to_the_nearest_page_above_a_form(client, alice, bob):
    client.login(username="alice", password=PASSWORD)
    assert client.get(f"/users/{bob.pk}/role/")["Location"] == "/users/"


def test_it_leaves_scripts_their_405(client, alice):
    client.login(username="alice", password=PASSWORD)
    assert client.get("/v1/chat/completions").status_code in (401, 405)
