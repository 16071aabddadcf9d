"""A lab admin adds a laptop in the browser and watches the panel work on it live."""

from nodes.models import Node
from nodes.remote import ssh
from tests.browser import browser_page, log_in
from tests.conftest import PASSWORD
from tests.nodes.laptops import target
from tests.services import unused_address


def test_it_adds_a_laptop_after_showing_its_fingerprint_then_reports_live(alice, lan, web_server, celery_worker):
    the_lan = lan(3)
    laptop = the_lan.laptops[0]
    ssh.sh(target(the_lan, laptop), "rm -rf .clusterpanel")  # a laptop that never had the runtime
    with browser_page() as page:
        log_in(page, web_server, "alice", PASSWORD)
        page.goto(f"{web_server}/nodes/add/")
        page.fill("#id_name", "desk-1")
        page.fill("#id_host", laptop.address)
        page.fill("#id_username", laptop.user)
        page.click("text=Next: check the host key")
        assert page.locator("#fingerprint").inner_text() == laptop.host_key_fingerprint
        page.fill("#id_password", laptop.password)
        page.click("text=Trust this key and add the laptop")
        page.wait_for_url(f"{web_server}/nodes/desk-1/")
        page.evaluate("window.stillTheSamePage = true")
        page.wait_for_selector("#actions li.succeeded >> text=Probe", timeout=60_000)
        page.click("text=Install runtime")
        page.wait_for_url(f"{web_server}/nodes/desk-1/")
        page.evaluate("window.stillTheSamePage = true")
        page.wait_for_selector("#actions li.action.succeeded >> text=Runtime installed and verified", timeout=120_000)
        assert page.evaluate("window.stillTheSamePage") is True, "the page updated without a reload"
        assert page.locator("#actions li.succeeded .rate").count() >= 1, "it showed the copy's speed"
    node = Node.objects.get(name="desk-1")
    assert node.host_key == laptop.host_key
    assert node.private_key == ""
    ssh.sh(node.ssh_target(), "rm -rf .clusterpanel")


def test_it_explains_an_unreachable_address_on_the_form(alice, lan, web_server):
    ghost = unused_address(lan(3).subnet, 251)
    with browser_page() as page:
        log_in(page, web_server, "alice", PASSWORD)
        page.goto(f"{web_server}/nodes/add/")
        page.fill("#id_name", "ghost")
        page.fill("#id_host", ghost)
        page.fill("#id_username", "nobody")
        page.click("text=Next: check the host key")
        assert f"Cannot reach {ghost}:22" in page.content()
    assert not Node.objects.exists()


def test_it_keeps_plain_users_out_of_laptop_pages(client, bob):
    client.login(username="bob", password=PASSWORD)
    assert client.get("/nodes/").status_code == 403
    assert client.get("/nodes/add/").status_code == 403
