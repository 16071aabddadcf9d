"""A real headless Chromium (Debian's), driven by Playwright; no browser download.

Every page opened here is held to the panel's Content-Security-Policy: a test whose pages broke it fails
when its browser closes, naming each violation (a test that failed already keeps its own error). So give
`wait_for_function` a function ("() => …"): Playwright runs a bare expression through eval, which the policy
refuses.
"""

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

# Playwright's sync API runs an event loop in this thread; the tests' own ORM calls are still synchronous.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


@contextmanager
def browser_page() -> Iterator:
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        pytest.fail("Chromium is not installed; `make test` installs it (apt-get install chromium).")
    profile = tempfile.mkdtemp(prefix="clusterpanel-chromium-")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=executable, headless=True, args=CHROMIUM_ARGS)
        page = context.new_page()
        page.watch = Watch(context)
        try:
            yield page
        finally:
            context.close()
            shutil.rmtree(profile, ignore_errors=True)
        page.watch.check()


@contextmanager
def browser() -> Iterator:
    """A headless Chromium whose `new_page()` each opens a page with cookies of its own (one user each)."""
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        pytest.fail("Chromium is not installed; `make test` installs it (apt-get install chromium).")
    with sync_playwright() as playwright:
        chromium = WatchedBrowser(
            playwright.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS))
        try:
            yield chromium
        finally:
            chromium.close()
        chromium.check()


class WatchedBrowser:
    """A Playwright browser whose `new_page()` pages are each watched (see Watch)."""

    def __init__(self, chromium) -> None:
        self.chromium, self.watches = chromium, []

    def new_page(self):
        context = self.chromium.new_context()
        page = context.new_page()
        page.watch = Watch(context)
        self.watches.append(page.watch)
        return page

    def close(self) -> None:
        self.chromium.close()

    def check(self) -> None:
        for watch in self.watches:
            watch.check()


# Added to every document before its own scripts, outside the page's CSP (Playwright injects it).
REPORT_VIOLATIONS = """
document.addEventListener("securitypolicyviolation", (event) => window.cspViolation(
  `${location.pathname}: ${event.effectiveDirective} refused ${event.blockedURI || "inline"}` +
  ` (${event.sourceFile || "the page"}:${event.lineNumber}) ${event.sample || ""}`));
"""


class Watch:
    """What a browser context's pages reported: CSP violations, console errors and uncaught script errors."""

    def __init__(self, context) -> None:
        self.violations: list[str] = []
        self.errors: list[str] = []
        context.expose_binding("cspViolation", lambda source, text: self.violations.append(text))
        context.add_init_script(REPORT_VIOLATIONS)
        context.on("console", lambda message: message.type == "error" and self.errors.append(
            f"{message.location.get('url', '')}: {message.text}"))
        context.on("weberror", lambda error: self.errors.append(f"uncaught: {error.error}"))

    def check(self) -> None:
        """Fails the test on any CSP violation (console errors are for tests that ask for them)."""
        if self.violations:
            pytest.fail("The pages broke the Content-Security-Policy:\n" + "\n".join(self.violations),
                        pytrace=False)


def log_in(page, base_url: str, username: str, password: str) -> None:
    page.goto(f"{base_url}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/login/" not in url)
