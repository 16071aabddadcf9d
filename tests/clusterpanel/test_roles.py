"""Lab admins manage the lab; plain users cannot reach admin pages."""

from tests.conftest import PASSWORD


def test_it_shows_the_system_page_to_a_lab_admin(client, alice):
    client.login(username="alice", password=PASSWORD)
    response = client.get("/status/")
    assert response.status_code == 200
    assert b"Redis" in response.content and b"Database" in response.content


def test_it_forbids_the_system_page_to_a_plain_user(client, bob):
    client.login(username="bob", password=PASSWORD)
    assert client.get("/status/").status_code == 403


def test_it_sends_a_plain_user_to_the_chat_and_hides_admin_links(client, bob):
    landed = client.post("/login/", {"username": "bob", "password": PASSWORD}, follow=True)
    assert landed.status_code == 200 and "/chat/" in landed.redirect_chain[-1][0]
    response = client.get("/")
    assert response.status_code == 200 and b"Your work in progress" in response.content, "their own dashboard"
    assert b"/status/" not in response.content and b"/nodes/" not in response.content


def test_it_rejects_a_wrong_password_in_plain_words(client, alice):
    response = client.post("/login/", {"username": "alice", "password": "nope"})
    assert response.status_code == 200
    assert b"do not match" in response.content
