"""Lab admins manage people on the Users page, never through the Django admin: add (the panel chooses the
password and shows it once), set a role, reset a password (old sessions end), disable and enable. The panel
always keeps an active lab admin. Errors come as pages of the panel, with a way back."""

from django.test import Client

from clusterpanel.accounts.models import ApiToken, Role, User
from tests.conftest import PASSWORD


def logged_in(user) -> Client:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client


def test_an_admin_adds_a_user_who_logs_in_with_the_password_shown_once(alice):
    client = logged_in(alice)
    page = client.post("/users/", {"username": "carol", "role": "user"})
    assert page.status_code == 200
    password = page.context["password"]
    assert password in page.content.decode() and "shown only this once" in page.content.decode()
    assert password not in client.get("/users/").content.decode()
    carol = User.objects.get(username="carol")
    assert carol.role == Role.USER and not carol.is_staff and carol.check_password(password)
    assert Client().login(username="carol", password=password)


def test_bad_or_taken_names_are_refused_and_nothing_is_made(alice):
    client = logged_in(alice)
    for name, role, said in [("", "user", "Give the user a name"), ("ALICE", "user", "already a user called"),
                             ("a b", "user", "letters, digits and @ . + - _ only"), ("x" * 151, "user", "151"),
                             ("dave", "root", "Choose a role")]:
        page = client.post("/users/", {"username": name, "role": role})
        assert page.status_code == 400 and said in page.content.decode()
    assert User.objects.count() == 1


def test_role_changes_and_the_last_admin_stays_an_admin(alice, bob):
    client = logged_in(alice)
    client.post(f"/users/{bob.pk}/role/", {"role": "admin"})
    bob.refresh_from_db()
    assert bob.role == Role.ADMIN and bob.is_lab_admin
    said = client.post(f"/users/{alice.pk}/role/", {"role": "user"}, follow=True).content.decode()
    assert "You cannot make yourself a plain user" in said
    client.post(f"/users/{bob.pk}/role/", {"role": "user"})
    bob.refresh_from_db()
    assert bob.role == Role.USER and not bob.is_lab_admin


def test_a_reset_password_ends_the_old_one_and_its_sessions(alice, bob):
    bobs = logged_in(bob)
    assert bobs.get("/chat/").status_code == 302
    page = logged_in(alice).post(f"/users/{bob.pk}/password/")
    new = page.context["password"]
    assert "logged out everywhere" in page.content.decode()
    assert bobs.get("/chat/")["Location"].startswith("/login/"), "the old session is over"
    assert not Client().login(username="bob", password=PASSWORD)
    assert Client().login(username="bob", password=new)


def test_disable_asks_then_locks_out_the_user_and_their_tokens_and_enable_gives_it_back(alice, bob):
    _, key = ApiToken.issue(bob, "script")
    client = logged_in(alice)
    question = client.get(f"/users/{bob.pk}/disable/").content.decode()
    assert "Disable bob?" in question and "Their 1 API token stops working" in question
    assert User.objects.get(pk=bob.pk).is_active
    client.post(f"/users/{bob.pk}/disable/")
    assert not User.objects.get(pk=bob.pk).is_active
    assert not Client().login(username="bob", password=PASSWORD)
    assert Client().get("/api/deployments/", HTTP_AUTHORIZATION=f"Bearer {key}").status_code == 401
    client.post(f"/users/{bob.pk}/enable/")
    assert Client().login(username="bob", password=PASSWORD)
    assert Client().get("/api/deployments/", HTTP_AUTHORIZATION=f"Bearer {key}").status_code == 200


def test_nobody_disables_themselves_or_the_last_admin(alice):
    client = logged_in(alice)
    response = client.post(f"/users/{alice.pk}/disable/")
    assert response.status_code == 409 and "You cannot disable yourself" in response.content.decode()
    assert User.objects.get(pk=alice.pk).is_active


def test_plain_users_get_the_panels_403_page_with_a_way_back(bob, alice):
    client = logged_in(bob)
    for url in ("/users/", f"/users/{alice.pk}/disable/"):
        response = client.get(url)
        assert response.status_code == 403
        page = response.content.decode()
        assert "Only lab admins can do this." in page and 'href="/"' in page and "Log out" in page
    assert client.post(f"/users/{alice.pk}/role/", {"role": "user"}).status_code == 403
    assert User.objects.get(pk=alice.pk).role == Role.ADMIN


def test_a_lab_admin_who_is_not_staff_is_told_about_the_django_admin_instead_of_looping(alice):
    assert not alice.is_staff
    client = logged_in(alice)
    response = client.get("/admin/", follow=True)
    assert response.status_code == 403 and len(response.redirect_chain) <= 2
    assert "Users page" in response.content.decode()


def test_a_missing_page_is_the_panels_404_page(alice):
    response = logged_in(alice).get("/nodes/no-such-laptop/")
    assert response.status_code == 404
    page = response.content.decode()
    assert "There is nothing at <code>/nodes/no-such-laptop/</code>" in page and "Back to the panel" in page
