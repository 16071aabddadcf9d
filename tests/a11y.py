"""axe-core on a page the test has open (the copy bundled by axe-playwright-python: nothing downloaded).

axe's script is injected as Playwright evaluates it, outside the page's Content-Security-Policy, and runs
only in the test's browser. A page passes with no violation of serious or critical impact, and no moderate
one beyond those listed in MODERATE_ACCEPTED (each with the reason it is accepted).
"""

from axe_playwright_python.sync_playwright import Axe

AXE = Axe()
MODERATE_ACCEPTED: dict[str, str] = {}


def violations(page) -> list[str]:
    """Each violation that fails a page, in words: rule, impact, what to fix, where."""
    found = AXE.run(page).response.get("violations", [])
    failing = [v for v in found if v["impact"] in ("serious", "critical")
               or (v["impact"] == "moderate" and v["id"] not in MODERATE_ACCEPTED)]
    return [f"{page.url}: {v['id']} ({v['impact']}): {v['help']} — {len(v['nodes'])} element(s), first "
            f"{v['nodes'][0]['target']}" for v in failing]
