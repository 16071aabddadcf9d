"""A lab admin watches a deployment's slots fill in a real browser as its engine reports them (the row's engine
dict, then "deployment.engine" to the page's socket, as jobs/engine/child.py set_engine does): "2 of 4 busy" with the
jobs in them, then "4 of 4", and the tokens/s falling to 0 once no report has come for 5 s. The dashboard shows
each deployment's waiting jobs, interactive and batch apart, and follows new ones without a reload."""

import threading
import time

import pytest

from clusterpanel.kit.broadcast import broadcast
from jobs.models import Batch, Job, JobKind, JobStatus
from models_app.models import Deployment
from tests.browser import browser_page, log_in
from tests.conftest import PASSWORD
from tests.jobs.standins import ready_deployment


@pytest.fixture
def deployment(transactional_db) -> Deployment:
    deployment = ready_deployment()
    deployment.plan = {"stages": []}
    deployment.engine = {"state": "ready"}  # an engine of before slots: the page shows none
    deployment.save()
    return deployment


def in_thread(call, *args) -> None:
    """Channel-layer calls off Playwright's thread, which runs its own event loop."""
    worker = threading.Thread(target=call, args=args)
    worker.start()
    worker.join()


def engine_says(deployment: Deployment, **fields) -> None:
    deployment.engine = {**deployment.engine, **fields}
    Deployment.objects.filter(pk=deployment.pk).update(engine=deployment.engine)
    in_thread(broadcast, f"deployment_{deployment.pk}", "deployment.engine", deployment.engine)


def job(deployment, user, status=JobStatus.RUNNING, batch=None, line=None) -> Job:
    kind = JobKind.BATCH_ITEM if batch else JobKind.CHAT
    return Job.objects.create(kind=kind, deployment=deployment, user=user, status=status, batch=batch, line=line)


def socket_heard(page) -> list:
    """Not empty once the page's socket has received a message: it has joined the deployment's group."""
    heard = []
    page.on("websocket", lambda socket: socket.on("framereceived", lambda frame: heard.append(frame)))
    return heard


def wait_for(page, check, seconds: float) -> bool:
    """Playwright's events run only while it works: wait on it, not on this thread."""
    for _ in range(int(seconds * 10)):
        if check():
            return True
        page.wait_for_timeout(100)
    return check()


def text_is(page, selector: str, text: str, timeout: float = 10_000) -> None:
    page.wait_for_function("([selector, text]) => document.querySelector(selector)?.textContent === text",
                           arg=[selector, text], timeout=timeout)


def test_it_shows_slots_filling_live_and_the_dashboard_counts_the_queue(alice, bob, deployment, web_server):
    batch = Batch.objects.create(user=bob, deployment=deployment, name="lines.jsonl", input_format="jsonl")
    chat, item = job(deployment, bob), job(deployment, bob, batch=batch, line=3)
    more = [job(deployment, alice), job(deployment, bob, batch=batch, line=4)]
    with browser_page() as page:
        heard = socket_heard(page)
        log_in(page, web_server, "alice", PASSWORD)
        page.goto(f"{web_server}/models/deployments/{deployment.pk}/")
        assert wait_for(page, lambda: heard, 10), "the deployment page's socket told nothing"
        assert page.inner_text("#slots").strip() == "", "no slots shown for an engine that names none"

        engine_says(deployment, slots=4, busy=2, jobs=[chat.pk, item.pk], tokens_per_s=12.5, at=time.time())
        text_is(page, "#slots .slot-count", "Slots: 2 of 4 busy")
        assert page.locator("#slots .slot.busy").count() == 2 and page.locator("#slots .slot").count() == 4
        assert page.inner_text("#slots .slot-rate") == "12.5 tokens/s"
        text_is(page, "#slots .slot-jobs", f"Running: #{chat.pk} (chat of bob), #{item.pk} "
                                           f"(batch #{batch.pk}, line 3, of bob)")
        assert page.get_attribute(f"#slots a:has-text('#{item.pk}')", "href") == f"/jobs/batches/{batch.pk}/"

        reported = time.time()
        engine_says(deployment, busy=4, jobs=[chat.pk, item.pk] + [j.pk for j in more], tokens_per_s=40.0,
                    at=reported)
        text_is(page, "#slots .slot-count", "Slots: 4 of 4 busy")
        assert page.locator("#slots .slot.busy").count() == 4
        assert page.inner_text("#slots .slot-rate") == "40.0 tokens/s"
        text_is(page, "#slots .slot-rate", "0.0 tokens/s", timeout=15_000)  # no report for 5 s: nothing generates
        assert time.time() - reported >= 4.5, "the rate fell to 0 before it was 5 s old"

        for _ in range(3):
            job(deployment, bob, status=JobStatus.QUEUED)
        for line in range(5, 7):
            job(deployment, bob, status=JobStatus.QUEUED, batch=batch, line=line)
        page.goto(f"{web_server}/")
        row = f"#queues tr[data-deployment='{deployment.pk}']"
        # Running, waiting (interactive), waiting (batch), slots busy
        assert [page.inner_text(f"{row} td:nth-child({n})") for n in (3, 4, 5, 6)] == ["4", "3", "2", "4 of 4"]
        job(deployment, alice, status=JobStatus.QUEUED)  # the dashboard follows without a reload
        text_is(page, f"{row} td:nth-child(4)", "4")
        assert page.inner_text(f"{row} td:nth-child(7)") == "0.0 tokens/s", "a figure with its unit"
        assert page.inner_text(f"{row} td:nth-child(9)") == "alice, bob", "who uses it"
        assert not page.watch.errors, page.watch.errors
