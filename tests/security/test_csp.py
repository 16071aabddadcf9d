"""Every page of the panel, with data in it, keeps to its Content-Security-Policy: a lab admin opens them all
(dashboard, laptops, doctor, models, plan, deployments, chat, batches, tokens, password, login and its lockout)
on a real deployment of the bundled model; no page reports a violation or a console error, every page carries
the policy, the charts are drawn, and an answer's Markdown image pointing at a server of ours is never fetched."""

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.utils import timezone

from jobs.models import Conversation, Job, JobKind, JobStatus
from tests.browser import browser_page, log_in
from tests.conftest import PASSWORD

CHARTS = ".main-svg"  # what plotly.js draws


@pytest.fixture
def probe() -> Iterator[tuple[int, list[str]]]:
    """A tiny HTTP server on 127.0.0.1 and the paths it was asked for: an image URL a browser must not fetch."""
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1], asked
    server.shutdown()
    server.server_close()


ALIGNED_TABLE = "| n | name |\n|--:|:-:|\n| 1 | one |\n"  # markdown-it aligns cells with style=""


def answered_with_an_image(deployment, user, port: int) -> Conversation:
    """A conversation whose answer holds a Markdown image and an aligned table, as a model could write them."""
    conversation = Conversation.objects.create(user=user, deployment=deployment, title="pictures")
    now = timezone.now()
    Job.objects.create(kind=JobKind.CHAT, deployment=deployment, user=user, conversation=conversation,
                       messages=[{"role": "user", "content": "Draw me a chart."}], status=JobStatus.SUCCEEDED,
                       output=f"Here it is: ![chart](http://127.0.0.1:{port}/probe.png)\n\n{ALIGNED_TABLE}",
                       started=now,
                       first_token=now, finished=now, attempts=1, prompt_tokens=5, completion_tokens=9,
                       finish_reason="stop")
    return conversation


def visit(page, url: str, charts: bool = False) -> None:
    response = page.goto(url)
    assert response.ok, f"{url}: {response.status}"
    assert "script-src 'self'" in response.headers.get("content-security-policy", ""), f"{url} has no policy"
    if charts:
        page.wait_for_selector(CHARTS, timeout=30_000)
    page.wait_for_timeout(500)  # live pages open their sockets and fetch their first data


def lock_out(page, base: str) -> None:
    for n in range(5):
        page.goto(f"{base}/login/")
        page.fill("#id_username", "mallory")
        page.fill("#id_password", f"guess {n}")
        page.click("button[type=submit]")
    assert "Too many tries" in page.inner_text("main")
    assert all("status of 429" in error for error in page.watch.errors), page.watch.errors
    page.watch.errors.clear()  # Chromium logs the refusal's status as an error; it is the one expected here


def plan_and_look(page, base: str, names: list[str]) -> None:
    page.goto(f"{base}/models/plan/")
    for name in names:
        page.check(f"text={name}")
    page.fill("#id_ctx", "512")
    page.click("button:has-text('Plan')")
    page.wait_for_selector(f"#plan-memory {CHARTS}")


def chat_and_look(page, base: str, conversation: Conversation) -> None:
    visit(page, f"{base}/chat/{conversation.pk}/")
    assert page.locator(".turn .answer img").count() == 0
    assert page.locator(".turn .answer a").first.inner_text() == "chart"
    page.fill("#params input[name=max_tokens]", "8")
    page.fill("#text", "Say hello.")
    page.click("#send")  # the answer streams in over a WebSocket, then turns into Markdown from the server
    page.wait_for_function("() => document.querySelectorAll('.turn .answer.streaming').length === 0 && "
                           "document.querySelectorAll('.turn').length === 2", timeout=120_000)


def batch_and_look(page, base: str, deployment) -> None:
    page.goto(f"{base}/jobs/batches/")
    page.select_option("#id_deployment", str(deployment.pk))
    page.set_input_files("#id_file", {"name": "p.csv", "mimeType": "text/csv",
                                      "buffer": b"prompt,max_tokens\nName a colour.,4\n"})
    page.click("text=Upload and queue")
    page.wait_for_url(lambda url: url.rstrip("/").split("/")[-1].isdigit())
    page.wait_for_selector("#batch-done:has-text('1 of 1 done')", timeout=120_000)
    visit(page, f"{base}/jobs/batches/")


def test_it_keeps_every_page_to_the_policy_and_fetches_no_image(cluster, alice, web_server, probe):
    port, asked = probe
    base, nodes = web_server, [stage.node for stage in cluster.stages.select_related("node", "server")]
    conversation = answered_with_an_image(cluster, alice, port)
    with browser_page() as page:
        visit(page, f"{base}/login/")
        lock_out(page, base)
        log_in(page, base, "alice", PASSWORD)
        visit(page, f"{base}/", charts=True)
        for path in ("/status/", "/nodes/", "/nodes/add/", "/nodes/doctor/", "/models/", "/models/deployments/",
                     "/account/password/"):
            visit(page, base + path)
        visit(page, f"{base}/nodes/{nodes[0].name}/", charts=True)
        visit(page, f"{base}/nodes/{nodes[0].name}/doctor/")
        visit(page, f"{base}/nodes/{nodes[0].name}/rpc-server/{nodes[0].stages.first().server.port}/log/")
        visit(page, f"{base}/models/{cluster.model.name}/", charts=True)
        visit(page, f"{base}/models/deployments/{cluster.pk}/", charts=True)
        plan_and_look(page, base, [node.name for node in nodes])
        chat_and_look(page, base, conversation)
        batch_and_look(page, base, cluster)
        visit(page, f"{base}/account/tokens/")
        page.fill("input[name=name]", "a script")
        page.click("button[type=submit]:has-text('Make')")
        page.wait_for_selector("text=cp_")
        page.wait_for_timeout(1000)
        problems = page.watch
    assert problems.violations == [] and problems.errors == [], problems.__dict__
    assert asked == [], "the browser fetched the Markdown image"
