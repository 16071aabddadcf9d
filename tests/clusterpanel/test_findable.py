"""What one page sends people to, they find: the password change is on every page beside one's name (the Users
page named an "Account → Password" no menu showed), and the API tokens page links the API reference."""

from tests.conftest import PASSWORD


def test_it_shows_the_password_change_beside_ones_name_on_every_page(client, bob):
    client.login(username="bob", password=PASSWORD)
    for path in ("/", "/chat/", "/account/tokens/"):
        assert 'href="/account/password/"' in client.get(path, follow=True).content.decode(), path


def test_it_sends_users_to_a_link_that_exists(client, alice):
    client.login(username="alice", password=PASSWORD)
    page = client.get("/users/").content.decode()
    assert "Account → Password" not in page and '<a href="/account/password/">Change password</a>' in page


def test_it_links_the_api_reference_from_the_tokens_page(client, bob):
    client.login(username="bob", password=PASSWORD)
    page = client.get("/account/tokens/").content.decode()
    assert 'href="/api/docs/"' in page and 'href="/api/schema/"' in page
    assert client.get("/api/docs/").status_code == 200
