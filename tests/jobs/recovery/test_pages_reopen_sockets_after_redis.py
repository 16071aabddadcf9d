"""A page's socket, closed by a Redis restart (killed, back eight seconds later), opens again within a second or
two of Redis' return, in a real browser: the page tries again at most a second apart. Before, it waited up to
twice as long after each try, so it reopened up to 11 s after Redis was back."""

import time

from jobs.batches import service as batches
from tests.browser import browser_page, log_in
from tests.conftest import PASSWORD
from tests.jobs.standins import ready_deployment
from tests.services import redis_down

OUTAGE_S = 8


def sockets_of(page) -> list[dict]:
    """Each socket the page opens: when, and how many frames it received (a batch's socket sends counts first)."""
    seen: list[dict] = []

    def opened(socket) -> None:
        record = {"at": time.monotonic(), "frames": 0}
        socket.on("framereceived", lambda *_: record.update(frames=record["frames"] + 1))
        seen.append(record)

    page.on("websocket", opened)
    return seen


def first(page, sockets: list[dict], after: float, within: float) -> dict | None:
    """The first socket opened after `after` that received something, waiting up to `within` seconds (the
    browser's events come in while Playwright waits, not while this thread sleeps)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found = next((s for s in sockets if s["at"] > after and s["frames"]), None)
        if found:
            return found
        page.wait_for_timeout(100)
    return None


def test_a_pages_socket_opens_again_within_seconds_of_redis_return(web_server, bob):
    batch = batches.from_file(bob, ready_deployment(), "three.csv", b"prompt\nOne\nTwo\nThree\n")
    with browser_page() as page:
        sockets = sockets_of(page)
        log_in(page, web_server, "bob", PASSWORD)
        page.goto(f"{web_server}/jobs/batches/{batch.pk}/")
        assert first(page, sockets, 0, 15), "the batch page's socket opened"
        with redis_down():
            page.wait_for_timeout(OUTAGE_S * 1000)
        back = time.monotonic()
        again = first(page, sockets, back, 20)
    assert again is not None, "the page never opened its socket again"
    assert again["at"] - back < 5, f"opened again {again['at'] - back:.1f} s after Redis' return"
