"""Pages left open: a deployment page and a chat page whose question waits behind a long job stay idle for ten
times the longest timeout in their sockets' path in a real browser; their sockets stay open (none closes, none is
opened again) and still deliver.

The timeouts are the web server's, made short (web_env): its WebSocket pings and the wait for the browser's answer,
the channel layer's wait for a message and Redis' read timeout. The long job holds the engine meanwhile, its
laptops held to a sliver of a core; it is cancelled once the pages have idled."""

import threading
import time

import pytest

from jobs.engine.child import set_engine
from jobs.models import Job, JobKind, JobStatus
from jobs.queue import ending, queueing
from models_app.models import Deployment
from tests.browser import browser, log_in
from tests.conftest import PASSWORD, wait_until
from tests.jobs.cluster import GREEDY, slowed

SHORT_TIMEOUTS = {"WEBSOCKET_PING_S": 1, "WEBSOCKET_PING_TIMEOUT_S": 2, "CHANNEL_WAIT_S": 1,
                  "REDIS_READ_TIMEOUT_S": 2}
IDLE_S = 10 * max(SHORT_TIMEOUTS.values())


@pytest.fixture
def web_env() -> dict[str, str]:
    return {name: str(seconds) for name, seconds in SHORT_TIMEOUTS.items()}


@pytest.fixture
def cluster_ctx() -> int:
    return 2048


def sockets_of(page) -> list[dict]:
    """Every WebSocket the page opens, with whether it closed and how many frames it received."""
    seen: list[dict] = []

    def opened(socket) -> None:
        record = {"url": socket.url, "closed": False, "frames": 0}
        socket.on("close", lambda *_: record.update(closed=True))
        socket.on("framereceived", lambda *_: record.update(frames=record["frames"] + 1))
        seen.append(record)

    page.on("websocket", opened)
    return seen


def in_thread(call, *args) -> None:
    """ORM and channel-layer calls off Playwright's thread, which runs its own event loop."""
    worker = threading.Thread(target=call, args=args)
    worker.start()
    worker.join()


def engine_settled(deployment: Deployment, quiet_s: float = 4.0) -> bool:
    """The engine idle, and its state unchanged for `quiet_s`: it has nothing more to say for now."""
    before = Deployment.objects.get(pk=deployment.pk).engine
    time.sleep(quiet_s)
    return before.get("busy") == 0 and Deployment.objects.get(pk=deployment.pk).engine == before


def test_idle_pages_keep_their_sockets_and_still_deliver(cluster, alice, bob, web_server):
    blocker = queueing.submit(Job(kind=JobKind.COMPLETION, deployment=cluster, user=alice,
                                  prompt="1, 2, 3, 4, 5, 6,", params={**GREEDY, "max_tokens": 1900}))
    with slowed(cluster, cpus=0.02), browser() as chromium:
        admin_page, chat_page = chromium.new_page(), chromium.new_page()
        wait_until(lambda: Job.objects.get(pk=blocker.pk).status == JobStatus.RUNNING, 60, "the long job to start")
        admin_sockets, chat_sockets = sockets_of(admin_page), sockets_of(chat_page)
        log_in(admin_page, web_server, "alice", PASSWORD)
        admin_page.goto(f"{web_server}/models/deployments/{cluster.pk}/")
        log_in(chat_page, web_server, "bob", PASSWORD)
        chat_page.fill("#params input[name=max_tokens]", "12")
        chat_page.fill("#params input[name=temperature]", "0")
        chat_page.fill("#text", "Say hello.")
        chat_page.click("#send")
        chat_page.wait_for_selector(".turn .meta:has-text('in the queue')")

        time.sleep(IDLE_S)
        assert Job.objects.get(pk=blocker.pk).status == JobStatus.RUNNING, "the long job ended too early"
        assert admin_sockets and chat_sockets, "both pages opened their sockets"
        assert not any(s["closed"] for s in admin_sockets + chat_sockets), (admin_sockets, chat_sockets)

        in_thread(lambda: ending.cancel(Job.objects.get(pk=blocker.pk)))
        chat_page.wait_for_function(
            "() => document.querySelector('.turn .answer').classList.contains('streaming') === false", timeout=120_000)
        # Once the engine is idle and has said so: it writes its whole state every 2 s while it generates, and
        # once more when it finds nothing left to run, which once put "ready" back within the same frame as the
        # news below (jobs/engine/loop.py report).
        wait_until(lambda: engine_settled(cluster), 60, "the engine to idle and say so")
        in_thread(lambda: set_engine(cluster, state="loading", progress=0.42))
        admin_page.wait_for_function("() => document.getElementById('engine-state').textContent.includes('42 %')",
                                     timeout=10_000)
        in_thread(lambda: set_engine(cluster, state="ready", progress=1.0))
        asked = Job.objects.get(user=bob)
        assert asked.status == JobStatus.SUCCEEDED and asked.output.strip()
        assert asked.timings()["queue_wait_s"] > IDLE_S
        job_sockets = [s for s in chat_sockets if f"/ws/jobs/{asked.pk}/" in s["url"]]
        assert len(job_sockets) == 1, f"the chat page had to reopen its socket: {job_sockets}"
        assert job_sockets[0]["frames"] > 3, "tokens came through the socket that waited idle"
        assert not any(s["closed"] for s in admin_sockets), admin_sockets


def test_the_web_server_pings_sockets_as_its_settings_say(settings):
    from clusterpanel.web.webserver import PanelServer

    settings.WEBSOCKET_PING_S, settings.WEBSOCKET_PING_TIMEOUT_S = 3, 4
    server = PanelServer(application=None, endpoints=["tcp:port=0"], ping_interval=20, ping_timeout=30)  # not run
    assert (server.ping_interval, server.ping_timeout) == (3, 4)
