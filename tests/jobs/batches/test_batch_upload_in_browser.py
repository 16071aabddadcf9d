"""A user uploads batch files in the browser: a bad line is listed with its number and reason while the good
lines are queued, the counts then move live; a file of bad lines only is refused and creates nothing."""

import threading

from clusterpanel.kit.broadcast import broadcast
from jobs.batches import service as batches
from jobs.models import Batch, Job, JobStatus
from tests.browser import browser_page, log_in
from tests.conftest import PASSWORD
from tests.jobs.standins import ready_deployment

ONE_BAD = b"prompt,max_tokens\nName a colour.,8\nName a fruit.,lots\nName a tree.,8\n"
ALL_BAD = b"prompt,max_tokens\n,8\nName a fruit.,0\n"


def upload(page, base: str, deployment, name: str, data: bytes) -> None:
    page.goto(f"{base}/jobs/batches/")
    page.select_option("#id_deployment", str(deployment.pk))
    page.set_input_files("#id_file", {"name": name, "mimeType": "text/csv", "buffer": data})
    page.click("text=Upload and queue")


def test_it_lists_the_bad_line_queues_the_good_ones_and_shows_progress_live(bob, web_server):
    deployment = ready_deployment()
    with browser_page() as page:
        log_in(page, web_server, "bob", PASSWORD)
        upload(page, web_server, deployment, "prompts.csv", ONE_BAD)
        batch = Batch.objects.get()
        page.wait_for_url(f"{web_server}/jobs/batches/{batch.pk}/")
        row = page.locator("#rejected tbody tr")
        assert row.count() == 1
        assert row.locator("td").nth(0).inner_text() == "3"
        assert "max_tokens must be a whole number" in row.locator("td").nth(2).inner_text()
        assert page.locator("#count-queued").inner_text() == "2"
        assert [job.line for job in batch.items.filter(status=JobStatus.QUEUED)] == [2, 4]

        first = batch.items.first()
        Job.objects.filter(pk=first.pk).update(status=JobStatus.SUCCEEDED)
        told = threading.Thread(target=broadcast, args=(batches.group(batch.pk), "batch.progress",
                                                        {"job": first.pk, "status": JobStatus.SUCCEEDED}))
        told.start()  # as the engine would, from outside Playwright's event loop
        told.join()
        page.wait_for_function("() => document.getElementById('count-succeeded').textContent === '1'", timeout=10_000)
        assert page.locator("#batch-done").inner_text() == "1 of 2 done"


def test_a_file_of_bad_lines_only_is_refused_and_creates_nothing(bob, web_server):
    deployment = ready_deployment()
    with browser_page() as page:
        log_in(page, web_server, "bob", PASSWORD)
        upload(page, web_server, deployment, "bad.csv", ALL_BAD)
        page.wait_for_selector("#file-error")
        assert "No line of the file can run (2 rejected); nothing was queued" in page.inner_text("#file-error")
        lines = page.locator("#rejected tbody tr td:first-child").all_inner_texts()
        assert lines == ["2", "3"]
        assert "The prompt is empty." in page.inner_text("#rejected")
    assert not Batch.objects.exists() and not Job.objects.exists()
