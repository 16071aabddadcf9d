"""A lab admin's day in a real browser, on simulated laptops, with real workers: add a laptop, set its
usable memory, plan with a pipeline order of their own, deploy, read the dashboard, remove a laptop the
deployment does not use, add a user; that user logs in, chats, renames and deletes the conversation.

Each step asserts what the page says. Every page on the way is checked with axe-core at a desktop and a
phone size (no serious or critical violation, no moderate one not accepted in tests/a11y.py) and must not
be wider than the screen; the main pages are photographed into docs/screenshots/ at both sizes.
"""

import re

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from clusterpanel.accounts.models import User
from jobs.models import Conversation
from models_app.library.adding import ensure_bundled
from models_app.models import Deployment, DeploymentStatus
from nodes.models import ActionKind, Node
from nodes.remote import ssh
from tests.a11y import violations
from tests.browser import browser, log_in
from tests.conftest import PASSWORD, ROOT, wait_until
from tests.jobs.cluster import end_engines
from tests.nodes.laptops import register, run_now, target
from tests.nodes.trouble import asleep
from tests.services import unused_address

ANSWERED = ("() => { const meta = document.querySelector('.turn .meta'); return meta && /tokens/.test(meta.innerText)"
            " && !document.querySelector('.turn .answer').classList.contains('streaming'); }")
WIDER = """(width) => [...document.querySelectorAll("*")].filter((e) => e.getBoundingClientRect().right > width + 1
  || e.scrollWidth > e.clientWidth + 1)
  .map((e) => `${e.tagName.toLowerCase()}${e.id ? "#" + e.id : ""}${e.className ? "." + e.className : ""}`)
  .slice(0, 6)"""
CHARTED = """(names) => { const strip = document.querySelector("#heat-strip [data-strip=cpu]");
  const trace = strip && strip.data && strip.data[0]; if (!trace) return false;
  const drawn = trace.y.filter((name, row) => trace.z[row].filter((v) => v !== null).length > 2);
  return names.every((name) => drawn.includes(name)); }"""
SIZES = {"desktop": (1440, 900), "phone": (390, 844)}
SHOTS = ROOT / "docs" / "screenshots"


class Checked:
    """Looks at every page of the journey at both sizes: accessibility, width, and a photograph if named."""

    def __init__(self, page) -> None:
        self.page, self.problems = page, []

    def __call__(self, shot: str | None = None) -> None:
        page = self.page
        page.wait_for_load_state("networkidle")
        for size, (width, height) in SIZES.items():
            page.set_viewport_size({"width": width, "height": height})
            try:  # charts redraw a moment after a resize (Plotly's "responsive" waits for it to end)
                page.wait_for_function("(width) => document.documentElement.scrollWidth <= width", arg=width,
                                       timeout=3000)
            except PlaywrightTimeout:
                wide = page.evaluate("() => document.documentElement.scrollWidth")
                self.problems.append(f"{size}: {page.url} is {wide} px wide on a {width} px screen, past it: "
                                     f"{page.evaluate(WIDER, width)}")
            self.problems += [f"{size}: {v}" for v in violations(page)]
            if shot:
                SHOTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(SHOTS / f"{shot}-{size}.png"), full_page=True)
        page.set_viewport_size({"width": 1440, "height": 900})


@pytest.fixture
def day(lan, web_server, celery_worker, supervisor, collector, alice):
    the_lan = lan(3)
    for laptop in the_lan.laptops:
        ssh.sh(target(the_lan, laptop), 'pkill -u "$(id -un)" -x ggml-rpc-server; true')
    ensure_bundled()
    yield the_lan
    supervisor.terminate()
    supervisor.wait(30)
    end_engines()


def test_a_lab_admins_day(day, web_server, alice):
    first, second, third = day.laptops[:3]
    for laptop in (second, third):  # two laptops are there already; the admin adds the first by hand
        assert run_now(register(day, laptop), ActionKind.PROBE).status == "succeeded"
    spare = Node.objects.create(name="spare", host=unused_address(day.subnet), username="nobody",
                                host_key=second.host_key)
    with browser() as chromium:
        page = chromium.new_page()
        check = Checked(page)
        log_in(page, web_server, "alice", PASSWORD)
        assert page.url == f"{web_server}/", "a lab admin lands on the dashboard"

        page.goto(f"{web_server}/nodes/add/")
        check()
        page.fill("#id_name", "desk-1")
        page.fill("#id_host", first.address)
        page.fill("#id_username", first.user)
        page.click("text=Next: check the host key")
        assert page.locator("#fingerprint").inner_text() == first.host_key_fingerprint
        check()
        page.fill("#id_password", first.password)
        page.click("text=Trust this key and add the laptop")
        page.wait_for_url(f"{web_server}/nodes/desk-1/")
        page.wait_for_selector("#actions li.succeeded >> text=Probe", timeout=60_000)

        page.click("#edit-node")
        check()
        page.fill("#id_usable_gb", "1.5")
        page.click("button:has-text('Save')")
        page.wait_for_url(f"{web_server}/nodes/desk-1/")
        assert "desk-1 saved." in page.content()
        assert page.locator("#usable-memory").inner_text().startswith("Usable for layers: 1.5 GiB (set by hand)")
        check("laptop")

        page.goto(f"{web_server}/models/plan/")
        for name in ("desk-1", second.name, third.name):
            page.check(f"text={name}")
        page.fill("#id_ctx", "512")
        page.fill("#id_slots", "2")
        page.select_option("#id_mode", "even")
        page.fill("#id_order", f"{third.name}, desk-1")
        page.click("button:has-text('Plan')")
        even = page.locator("tbody tr", has_text="even").inner_text()
        assert re.search(rf"{third.name} \d+ · desk-1 \d+ · {second.name} \d+", even), even
        check("plan")
        page.click("button:has-text('Deploy')")
        page.wait_for_selector("#deployment-status.state-ready", timeout=300_000)
        deployment = Deployment.objects.get(status=DeploymentStatus.READY)
        assert [s.node.name for s in deployment.stages.order_by("position")] == [third.name, "desk-1", second.name]
        page.wait_for_selector("#engine-state >> text=Ready: the model is loaded", timeout=180_000)
        check("deployment")

        page.goto(f"{web_server}/")
        page.wait_for_function(CHARTED, arg=["desk-1", second.name, third.name], timeout=30_000)
        row = page.locator(f"tr[data-deployment='{deployment.pk}']")
        assert "Ready" in row.inner_text() and "2 of 2" not in row.inner_text()
        assert re.search(r"desk-1\s+Ready\s+smollm2[^:]*: layers \d+–\d+", page.locator(".node-strip").inner_text())
        check("dashboard")

        page.goto(f"{web_server}/nodes/{spare.name}/")
        page.click("#remove-node")
        assert "spare leaves the panel" in page.locator("#consequences").inner_text()
        check()
        page.click("#confirm-button")
        page.wait_for_url(f"{web_server}/nodes/")
        assert "spare removed." in page.content() and not Node.objects.filter(name="spare").exists()
        page.goto(f"{web_server}/nodes/desk-1/remove/")
        assert "desk-1 holds layers of" in page.locator("#refusal").inner_text(), "not while it serves"

        page.goto(f"{web_server}/models/deployments/{deployment.pk}/")
        assert page.locator("#recover").is_hidden(), "nothing to recover from yet"
        with asleep(first):  # desk-1's lid closes: its rpc-server and SSH answer nothing
            page.wait_for_selector("#troubles li[data-node='desk-1']", timeout=60_000)
            assert "desk-1: its rpc-server failed" in page.locator("#troubles").inner_text(), "said live"
            assert page.locator("#deployment-status").inner_text() == "Ready", "it still answers until it fails over"
            check()
            wait_until(lambda: Node.objects.get(name="desk-1").status == "offline", 30, "desk-1 shown offline")
            page.click("#replan")
            asked = page.locator("#consequences").inner_text()
            assert f"on {third.name}, {second.name}" in asked and "Left out, not ready: desk-1." in asked, asked
            page.click("#confirm-button")
            assert f"replaces #{deployment.pk}" in page.locator(".flash").inner_text()
            page.wait_for_selector("#deployment-status.state-ready", timeout=300_000)
            again = Deployment.objects.get(status=DeploymentStatus.READY)
            assert [s.node.name for s in again.stages.order_by("position")] == [third.name, second.name]
            assert Deployment.objects.get(pk=deployment.pk).status == DeploymentStatus.STOPPED
            page.wait_for_selector("#engine-state >> text=Ready: the model is loaded", timeout=180_000)

        page.goto(f"{web_server}/users/")
        page.fill("#username", "carol")
        page.click("#add-user button")
        password = page.locator("#password").inner_text()
        assert User.objects.get(username="carol").check_password(password)
        check("users")

        carol = chromium.new_page()
        check_carol = Checked(carol)
        log_in(carol, web_server, "carol", password)
        assert "/chat/" in carol.url, "a user lands on the chat page"
        carol.fill("#params input[name=max_tokens]", "12")
        carol.fill("#params input[name=temperature]", "0")
        carol.fill("#text", "Name three colours.")
        carol.click("#send")
        carol.wait_for_function(ANSWERED, timeout=120_000)
        assert carol.locator(".turn .answer").inner_text().strip()
        assert carol.locator(".conversations li.current").inner_text() == "Name three colours.", "named at once"
        check_carol("chat")
        carol.fill("#title", "Colours")
        carol.click("#rename button")
        assert "Renamed to “Colours”." in carol.content()
        assert carol.locator(".conversations li.current").inner_text() == "Colours"
        carol.click("#delete-conversation")
        assert "“Colours” and its 1 message are deleted for good." in carol.locator("#consequences").inner_text()
        check_carol()
        carol.click("#confirm-button")
        carol.wait_for_load_state()
        assert "“Colours” deleted." in carol.content()
        assert not Conversation.objects.filter(title="Colours").exists()
        carol.goto(f"{web_server}/")
        assert "Models ready" in carol.content()
        check_carol("user-dashboard")

        page.goto(f"{web_server}/admin/")
        assert "Lab admins manage people on the Users page" in page.content()
        page.goto(f"{web_server}/nodes/no-such-laptop/")
        assert "There is nothing at" in page.content()
        check()
    problems = check.problems + check_carol.problems
    assert not problems, "\n".join(problems)
