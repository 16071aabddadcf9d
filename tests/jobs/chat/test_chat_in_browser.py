"""The chat page in a real browser, on a real deployment: the answer streams in, reloads keep the
conversation (and a reload mid-answer picks the stream up), Stop stops, and model text is never HTML."""

import re
import threading

from clusterpanel.kit.broadcast import broadcast
from jobs.models import Job, JobStatus
from jobs.queue import stream
from tests.browser import browser_page, log_in
from tests.conftest import PASSWORD, wait_until


def ask(page, text: str, max_tokens: int) -> None:
    page.fill("#params input[name=max_tokens]", str(max_tokens))
    page.fill("#params input[name=temperature]", "0")
    page.fill("#text", text)
    page.click("#send")


def test_an_answer_streams_in_and_the_conversation_survives_a_reload(cluster, bob, web_server):
    with browser_page() as page:
        log_in(page, web_server, "bob", PASSWORD)
        assert "/chat/" in page.url, "an end user lands on the chat page"
        ask(page, "Write a long story about a laptop.", 400)
        answer = page.locator(".turn .answer").last
        lengths = set()
        wait_until(lambda: lengths.add(len(answer.inner_text())) or len(lengths) > 3, 60, "the answer to grow")
        assert re.search(r"\d+ tokens", page.locator(".turn .meta").last.inner_text())

        page.reload()  # mid-answer: the page follows the running job again, from its first token
        job = Job.objects.get()
        wait_until(lambda: Job.objects.get(pk=job.pk).is_finished, 120, "the answer to finish")
        page.wait_for_function(
            "() => document.querySelector('.turn .answer').classList.contains('streaming') === false")
        job.refresh_from_db()
        assert job.status == JobStatus.SUCCEEDED
        shown = page.locator(".turn .answer").last.inner_text()
        assert shown.split()[:5] == job.output.split()[:5], "the page shows the whole answer from the start"
        assert "tokens/s" in page.locator(".turn .meta").last.inner_text()

        page.reload()
        assert page.locator(".turn").count() == 1 and "a laptop" in page.locator(".turn .question").inner_text()


def test_stop_stops_the_answer_and_model_text_is_shown_as_text_never_as_html(cluster, bob, web_server):
    with browser_page() as page:
        log_in(page, web_server, "bob", PASSWORD)
        ask(page, "Write a long story about a laptop.", 1500)
        wait_until(lambda: len(page.locator(".turn .answer").last.inner_text()) > 20, 60, "the answer to start")
        page.click("#stop")
        wait_until(lambda: Job.objects.get().is_finished, 30, "the job to stop")
        assert Job.objects.get().status == JobStatus.CANCELLED
        page.wait_for_selector("#send:not([disabled])")
        assert "stopped" in page.locator(".turn .meta").last.inner_text()

        # The next answer, on the same page: a token that looks like HTML is shown as the text it is.
        ask(page, "Say hello.", 300)
        wait_until(lambda: page.locator(".turn").count() == 2 and
                   len(page.locator(".turn .answer").last.inner_text()) > 3, 60, "the answer to start")
        job = Job.objects.latest("pk")
        hostile = '<img src=x onerror="document.title=\'owned\'">'
        event = {"event": "token", "seq": 10_000, "text": hostile, "t": 0}
        sender = threading.Thread(target=broadcast, args=(stream.group(job.pk), "job.event", event))
        sender.start()  # its own thread: Playwright's event loop runs in this one
        sender.join()
        wait_until(lambda: hostile in page.locator(".turn .answer").last.inner_text(), 10, "the text to show")
        assert page.locator(".turn .answer img").count() == 0 and page.title() != "owned"
