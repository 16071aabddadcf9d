"""The panel behind nginx terminating TLS, configured exactly as docs/proxy.md says.

A real nginx runs the documented site (only its addresses, ports and certificate paths put in for the
test's, all on 127.0.0.1) in front of the panel's real web server with BEHIND_TLS_PROXY=1; a client logs in
over https through it, as a browser would.
"""

import re
import socket
import ssl
import subprocess

import pytest
import requests
from websockets.sync.client import connect

from tests import nginx
from tests.conftest import PASSWORD, ROOT, free_port, stop, wait_for_port

DOCUMENTED = ROOT / "docs" / "proxy.md"


@pytest.fixture
def ports() -> dict[str, int]:
    return {"http": free_port(), "https": free_port()}


@pytest.fixture
def web_env() -> dict[str, str]:
    return {"BEHIND_TLS_PROXY": "1"}


@pytest.fixture
def certificate(tmp_path) -> tuple[str, str]:
    crt, key = tmp_path / "panel.crt", tmp_path / "panel.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                    "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out",
                    str(crt)], check=True, capture_output=True, timeout=60)
    return str(crt), str(key)


def put_in(text: str, written: str, ours: str) -> str:
    assert text.count(written) == 1, f"docs/proxy.md's nginx site has {written!r} once"
    return text.replace(written, ours)


def documented_site(web_port: int, ports: dict[str, int], certificate: tuple[str, str]) -> str:
    site = re.search(r"```nginx\n(.*?)```", DOCUMENTED.read_text(), re.S).group(1)
    site = put_in(site, "listen 80;", f"listen 127.0.0.1:{ports['http']};")
    site = put_in(site, "listen 443 ssl;", f"listen 127.0.0.1:{ports['https']} ssl;")
    site = put_in(site, "/etc/ssl/clusterpanel/panel.crt", certificate[0])
    site = put_in(site, "/etc/ssl/clusterpanel/panel.key", certificate[1])
    return put_in(site, "http://127.0.0.1:8000;", f"http://127.0.0.1:{web_port};")


@pytest.fixture
def proxy(web_server, ports, certificate, tmp_path) -> str:
    site = documented_site(int(web_server.rsplit(":", 1)[1]), ports, certificate)
    process = subprocess.Popen(nginx.command(tmp_path / "nginx", site), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        wait_for_port(ports["https"], process=process)
        yield f"https://127.0.0.1:{ports['https']}"
    finally:
        stop(process)
    assert process.returncode == 0, nginx.log(tmp_path / "nginx")


@pytest.fixture
def browser(proxy, certificate, alice) -> requests.Session:
    """Logged in as alice over https, sending the Origin a browser sends."""
    session = requests.Session()
    session.trust_env = False  # REQUESTS_CA_BUNDLE would take the place of our certificate
    session.verify = certificate[0]
    session.headers["Origin"] = proxy
    session.get(f"{proxy}/login/", timeout=30).raise_for_status()
    done = session.post(f"{proxy}/login/", timeout=30, data={
        "username": "alice", "password": PASSWORD, "csrfmiddlewaretoken": session.cookies["csrftoken"]})
    assert done.ok and done.url == f"{proxy}/", f"{done.status_code} {done.url}"
    return session


def test_it_logs_in_over_https_with_secure_cookies_and_hsts(proxy, browser):
    assert {cookie.name: cookie.secure for cookie in browser.cookies} == {"csrftoken": True, "sessionid": True}
    page = browser.get(f"{proxy}/", timeout=30)
    assert page.ok and page.url == f"{proxy}/", "the session holds"
    assert page.headers["Strict-Transport-Security"] == "max-age=31536000"


def test_it_passes_websockets_through_the_proxy(proxy, browser, certificate, tmp_path):
    context = ssl.create_default_context(cafile=certificate[0])
    address = proxy.replace("https://", "wss://")
    try:
        with connect(f"{address}/ws/status/", ssl=context, origin=proxy, open_timeout=30,
                     additional_headers={"Cookie": f"sessionid={browser.cookies['sessionid']}"}) as websocket:
            assert websocket.ping().wait(10), "the panel answers through the proxy"
    except TimeoutError as error:  # once in CI, on a loaded machine: say whose side the handshake stopped on
        access = tmp_path / "nginx" / "access.log"
        raise AssertionError(f"no handshake in 30 s; nginx's error log: {nginx.log(tmp_path / 'nginx')!r}; "
                             f"its access log: {access.read_text()[-2000:] if access.exists() else ''!r}") from error


def test_it_refuses_an_oversize_body_at_the_proxy(proxy, certificate):
    context = ssl.create_default_context(cafile=certificate[0])
    port = int(proxy.rsplit(":", 1)[1])
    with context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=30),
                             server_hostname="127.0.0.1") as tls:
        tls.sendall(b"POST /jobs/batches/ HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: sessionid=x\r\n"
                    b"Content-Length: 209715200\r\n\r\n" + b"x" * 4096)
        answer = tls.recv(65536)
    assert answer.startswith(b"HTTP/1.1 413") and b"nginx" in answer, answer[:300]


def test_it_redirects_plain_http_to_https(proxy, ports):
    session = requests.Session()
    session.trust_env = False
    answer = session.get(f"http://127.0.0.1:{ports['http']}/login/?next=/", allow_redirects=False, timeout=30)
    assert answer.status_code == 301 and answer.headers["Location"] == "https://127.0.0.1/login/?next=/"
