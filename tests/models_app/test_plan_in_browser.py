"""An admin plans the bundled model over unequal laptops, compares the modes, sees how many people the plan
serves at once and why, chooses the slots, deploys, and watches it get ready."""


from models_app.deploying import deploy
from models_app.library.adding import ensure_bundled
from models_app.models import Deployment, DeploymentStatus
from nodes.models import ActionKind, RpcServer, ServerStatus
from tests.browser import browser_page, log_in
from tests.conftest import PASSWORD, wait_until
from tests.nodes.laptops import register, run_now

MiB = 2**20
MEMORY_CHART_DRAWN = "() => document.querySelectorAll('#plan-memory .main-svg').length > 0"


def test_it_finds_a_plan_where_an_even_split_does_not_fit_and_deploys_it(
        alice, lan, web_server, celery_worker, supervisor):
    the_lan = lan(3)
    ensure_bundled()
    for laptop, usable in zip(the_lan.laptops, (120, 100, 60), strict=True):  # the model needs ~136 MiB
        node = register(the_lan, laptop)
        assert run_now(node, ActionKind.PROBE).status == "succeeded"
        node.usable_memory = usable * MiB
        node.save()
    with browser_page() as page:
        log_in(page, web_server, "alice", PASSWORD)
        page.goto(f"{web_server}/models/plan/")
        for laptop in the_lan.laptops:
            page.check(f"text={laptop.name}")
        page.fill("#id_ctx", "512")
        page.click("button:has-text('Plan')")
        rows = {row.locator("td").first.inner_text(): row.inner_text() for row in page.locator("tbody tr").all()}
        assert "GiB" in rows["even"], "an even split does not fit, and says why in numbers"
        assert "tokens" not in rows["fastest"] and rows["fastest"].split("\t")[2].replace(".", "").isdigit()
        # plan.js is a module script, run after the page is parsed: on a slow machine the rows are read before it
        page.wait_for_function(MEMORY_CHART_DRAWN, timeout=60_000)
        assert page.locator("#plan-memory .main-svg").count() >= 1, "the memory chart is drawn"
        offered = int(rows["fastest"].split("\t")[1])
        assert offered in (8, 4, 2, 1)
        assert page.locator(".people").inner_text().startswith(f"{offered} people at once, each up to 512 tokens")
        if offered < 8:  # the laptops are small: why not more
            assert f"With {offered * 2} slots of 512 tokens each it would not fit" in page.locator(
                ".slots-reason").inner_text()
        page.fill("#id_slots", "2")
        page.click("button:has-text('Plan')")
        assert page.locator(".people").inner_text().startswith("2 people at once, each up to 512 tokens (the KV")
        assert page.locator(".slots-reason").count() == 0, "chosen, not offered: nothing to explain"
        page.click("button:has-text('Deploy')")
        page.wait_for_selector("#deployment-status:has-text('Ready')", timeout=120_000)
        page.wait_for_selector("td[id^=preseed-]:has-text('done')")  # the laptops' tensor caches were pre-seeded
    deployment = Deployment.objects.get()
    assert deployment.status == DeploymentStatus.READY
    assert deployment.slots == deployment.plan["slots"] == 2
    assert deployment.stages.count() >= 2, "no single laptop could hold it"
    deploy.stop(deployment)
    wait_until(lambda: not RpcServer.objects.exclude(status=ServerStatus.STOPPED).exists(), 30, "every server stopped")
    assert not RpcServer.objects.exclude(status=ServerStatus.STOPPED).exists()
