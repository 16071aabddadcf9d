"""Anonymous visitors see the login page and nothing else."""

import urllib.error
import urllib.request

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

PUBLIC = {"login", "healthz", "admin-login", "favicon",  # favicon: a redirect to a static file
          "api-root", "openapi-json", "openapi-view",  # the REST API's schema and docs: how to call it, no data
          "ollama-root", "ollama-version"}  # what Ollama answers anyone: that it runs, and its API's version
APIS = ("api/", "v1/", "ollama/", "metrics")  # for scripts: no login page to send them to, a 401 instead


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def fetch(url: str) -> tuple[int, str, str]:
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(url, timeout=10) as response:
            return response.status, response.headers.get("Location", ""), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Location", ""), exc.read().decode()


def plain_paths(resolver: URLResolver, prefix: str = "") -> list[tuple[str, str]]:
    """Every route without parameters, as (path, name)."""
    found = []
    for entry in resolver.url_patterns:
        route = str(entry.pattern)
        if "<" in route or "(?P" in route or "^" in route:
            continue
        if isinstance(entry, URLPattern):
            found.append((prefix + route, entry.name or ""))
        elif isinstance(entry, URLResolver):
            found.extend(plain_paths(entry, prefix + route))
    return found


def test_it_serves_the_login_page(web_server):
    status, _, body = fetch(f"{web_server}/login/")
    assert status == 200
    assert 'name="password"' in body and "Log in" in body


@pytest.mark.parametrize("path", ["/", "/status/", "/admin/", "/account/password/"])
def test_it_redirects_anonymous_visitors_to_login(web_server, path):
    status, location, _ = fetch(f"{web_server}{path}")
    assert status == 302
    assert location.startswith("/login/?next=") or location.startswith("/admin/login/")


def test_it_leaves_no_page_open_to_anonymous_visitors(client, db):
    paths = plain_paths(get_resolver())
    assert len(paths) > 5
    for path, name in paths:
        if name in PUBLIC:
            continue
        response = client.get("/" + path, follow=True)
        if path.startswith(APIS):  # 405 for a path that takes no GET: it shows nothing either
            assert response.status_code in (401, 405), f"/{path} answered without a token"
            continue
        assert response.redirect_chain, f"/{path} answered without login"
        assert response.redirect_chain[-1][0].startswith("/login/"), f"/{path} did not end at login"


def test_it_tells_health_checks_only_whether_it_is_up(web_server):
    status, _, body = fetch(f"{web_server}/healthz")
    assert (status, body) == (200, '{"ok": true}')
