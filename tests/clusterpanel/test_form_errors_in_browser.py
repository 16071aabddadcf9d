"""A form's errors read as the panel's other errors (red, in a box, no bullets) and mark their field."""

from tests.browser import browser_page, log_in
from tests.conftest import PASSWORD


def test_it_shows_form_errors_as_errors(alice, web_server):
    with browser_page() as page:
        log_in(page, web_server, "alice", PASSWORD)
        page.goto(f"{web_server}/nodes/add/")
        page.fill("#id_host", "-bad host")
        page.click("button[type=submit]")
        error = page.locator("ul.errorlist").first
        looks = error.evaluate("(e) => { const s = getComputedStyle(e); return [s.listStyleType, s.color]; }")
        assert looks == ["none", "rgb(180, 35, 24)"]
        field = page.locator("#id_host")
        assert field.evaluate("(e) => getComputedStyle(e).borderTopColor") == "rgb(180, 35, 24)"
