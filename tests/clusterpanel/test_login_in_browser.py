"""A lab admin logs in with a real browser and lands where they were going."""

from tests.browser import browser_page
from tests.conftest import PASSWORD


def test_it_logs_an_admin_in_and_returns_to_the_page_asked_for(alice, web_server):
    with browser_page() as page:
        page.goto(f"{web_server}/status/")
        assert "/login/" in page.url
        page.fill("#id_username", "alice")
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(f"{web_server}/status/")
        assert page.locator("h1").inner_text() == "System"
        assert "alice" in page.locator(".who").inner_text()


def test_it_keeps_a_wrong_password_out(alice, web_server):
    with browser_page() as page:
        page.goto(f"{web_server}/login/")
        page.fill("#id_username", "alice")
        page.fill("#id_password", "not the password")
        page.click("button[type=submit]")
        assert "do not match" in page.locator(".error").inner_text()
        assert "/login/" in page.url
