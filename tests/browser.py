"""A real headless Chromium (Debian's), driven by Playwright; no browser download."""

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
        try:
            yield context.new_page()
        finally:
            context.close()
            shutil.rmtree(profile, ignore_errors=True)


@contextmanager
def browser() -> Iterator:
    """A headless Chromium whose `new_page()` each opens a page with cookies of its own (one user each)."""
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        pytest.fail("Chromium is not installed; `make test` installs it (apt-get install chromium).")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def log_in(page, base_url: str, username: str, password: str) -> None:
    page.goto(f"{base_url}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/login/" not in url)
