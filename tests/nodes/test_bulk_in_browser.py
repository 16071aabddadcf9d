"""A lab admin ticks laptops on the Laptops page (with the keyboard: every box labelled, one to tick them all),
probes them at once and watches each laptop's probe end live, then reads the summary; removing one asks first.
The laptops are listed as people count them (desk-2 before desk-10)."""

from nodes.models import Node
from tests.a11y import violations
from tests.browser import browser_page, log_in
from tests.conftest import PASSWORD
from tests.nodes.laptops import register, set_link

NAMES = ["desk-10", "desk-2", "desk-9"]  # desk-2 is the LAN's laptop 2, the one unplugged


def test_it_probes_the_ticked_laptops_showing_each_live_then_a_summary(alice, lan, web_server, celery_worker):
    the_lan = lan(3)
    for laptop, name in zip(the_lan.laptops, NAMES, strict=False):
        register(the_lan, laptop, name)
    with browser_page() as page:
        log_in(page, web_server, "alice", PASSWORD)
        page.goto(f"{web_server}/nodes/")
        assert page.locator("#laptops tbody tr").evaluate_all("rows => rows.map(r => r.dataset.node)") == [
            "desk-2", "desk-9", "desk-10"]
        assert violations(page) == []

        page.focus("#choose-all")
        page.keyboard.press("Space")  # every laptop, then desk-10 left out again, by keyboard alone
        page.get_by_label("Choose desk-10").focus()
        page.keyboard.press("Space")
        assert page.locator("#chosen-count").inner_text() == "2 of 3 chosen:"
        assert page.locator("#choose-all").evaluate("box => box.indeterminate") is True

        set_link(the_lan, 2, "down")
        try:
            page.get_by_role("button", name="Probe", exact=True).click()
            page.wait_for_selector("#selection")
            page.evaluate("window.stillTheSamePage = true")
            assert page.locator("#selection-actions li strong").all_inner_texts() == ["desk-2", "desk-9"]
            page.wait_for_selector("#selection-actions li.action.succeeded >> text=desk-9", timeout=60_000)
            page.wait_for_selector("#selection-summary.ended", timeout=60_000)
        finally:
            set_link(the_lan, 2, "up")
        assert page.evaluate("window.stillTheSamePage") is True, "each laptop's progress came live, not by reload"
        assert page.locator("#selection-summary").inner_text() == "1 probed; 1 unreachable: desk-2."
        assert violations(page) == [], "the selection's progress reads as well as the table"
        failed = page.locator("#selection-actions li.action.failed")
        assert "desk-2" in failed.inner_text() and "Cannot reach" in failed.inner_text()
        page.wait_for_selector("#laptops tr[data-node=desk-2] >> text=Offline")  # the table, drawn again
        assert page.locator("#laptops input[name=node]:checked").evaluate_all(
            "boxes => boxes.map(b => b.value)") == ["desk-2", "desk-9"], "the same laptops stay ticked"

        page.get_by_label("Choose desk-2").uncheck()
        page.get_by_role("button", name="Remove…").click()
        assert "desk-9 leaves the panel" in page.locator("#consequences").inner_text()
        page.click("#confirm-button")
        page.wait_for_selector("#selection-summary.ended", timeout=60_000)
        assert page.locator("#selection-summary").inner_text() == "1 removed."
        page.wait_for_selector("#laptops tr[data-node=desk-9]", state="detached")  # drawn after the summary
        assert page.locator("#laptops tbody tr").evaluate_all("rows => rows.map(r => r.dataset.node)") == [
            "desk-2", "desk-10"]
    assert sorted(Node.objects.values_list("name", flat=True)) == ["desk-10", "desk-2"]
