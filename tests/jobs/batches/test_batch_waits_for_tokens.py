"""A batch counts against its owner's tokens per day but is never refused: past the day's tokens its lines wait
in the queue (saying why on the batch's page and in /api/), and go on once the day allows. Everyone else's
batches run meanwhile."""

import json
from datetime import timedelta

from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from clusterpanel.accounts.models import ApiToken
from jobs.models import Batch, Job, JobKind, JobStatus, Usage
from jobs.queue import queueing
from tests.jobs.standins import ended_job
from tests.rows import client_for


def batch_of(user, deployment, lines: int, token=None) -> Batch:
    batch = Batch.objects.create(user=user, deployment=deployment, name=f"{user.username}'s", input_format="jsonl")
    Job.objects.bulk_create([Job(kind=JobKind.BATCH_ITEM, deployment=deployment, user=user, api_token=token,
                                 batch=batch, line=line, prompt="Once") for line in range(1, lines + 1)])
    return batch


def spent_yesterday(user) -> None:
    """The next UTC day has come, as far as the ledger can tell."""
    Usage.objects.filter(user=user).update(day=Usage.objects.filter(user=user).first().day - timedelta(days=1))


def test_a_batch_past_its_owners_tokens_waits_and_goes_on_the_next_day(ready, alice, bob):
    bob.tokens_per_day = 50
    bob.save()
    ended_job(ready, bob, prompt=30, completion=20)
    bobs = batch_of(bob, ready, 2)  # bob's came first: only the hold lets alice's go ahead
    alices = batch_of(alice, ready, 1)
    claimed = queueing.claim_next(ready.pk)
    assert claimed is not None and claimed.batch_id == alices.pk
    assert queueing.claim_next(ready.pk) is None, "bob's lines wait"
    assert set(bobs.items.values_list("status", flat=True)) == {JobStatus.QUEUED}, "waiting, not failed"

    page = client_for(bob).get(f"/jobs/batches/{bobs.pk}/").content.decode()
    assert 'id="batch-held"' in page and "used the day&#x27;s tokens" in page and "midnight UTC" in page
    headers = {"HTTP_AUTHORIZATION": f"Bearer {ApiToken.issue(bob, 'read')[1]}"}
    held = Client().get(f"/api/batches/{bobs.pk}/", **headers).json()["held"]
    assert held and "its owner has used the day's tokens" in held
    assert Client().get(f"/api/batches/{alices.pk}/", **headers).status_code == 404  # others' stay unseen

    spent_yesterday(bob)
    assert queueing.claim_next(ready.pk).batch_id == bobs.pk, "a new day: bob's lines run"
    assert Client().get(f"/api/batches/{bobs.pk}/", **headers).json()["held"] is None


def test_a_token_past_its_own_tokens_holds_only_the_lines_it_sent(ready, bob):
    nightly = ApiToken.issue(bob, "nightly")[0]
    nightly.tokens_per_day = 10
    nightly.save()
    ended_job(ready, bob, prompt=8, completion=2, token=nightly)
    by_token = batch_of(bob, ready, 1, token=nightly)
    on_page = batch_of(bob, ready, 1)
    assert queueing.claim_next(ready.pk).batch_id == on_page.pk
    assert queueing.claim_next(ready.pk) is None
    assert by_token.items.get().status == JobStatus.QUEUED


def test_held_lines_are_not_taken_for_lost_messages(ready, bob):
    """The supervisor wakes an engine whose jobs waited long with nothing running; lines held for the day are not
    stalled, so nothing is woken (nor a lost message logged) every half minute until midnight."""
    bob.tokens_per_day = 1
    bob.save()
    ended_job(ready, bob, prompt=1, completion=0)
    batch = batch_of(bob, ready, 1)
    batch.items.update(created=batch.created - timedelta(minutes=5))
    assert queueing.wake_if_stalled(ready, 30) is False


def test_uploading_a_batch_past_every_limit_is_never_refused(ready, bob):
    bob.tokens_per_day, bob.requests_per_minute, bob.concurrent_jobs = 1, 1, 1
    bob.save()
    ended_job(ready, bob, prompt=5, completion=5)
    Job.objects.create(kind=JobKind.CHAT, deployment=ready, user=bob)  # one concurrent job already
    token, key = ApiToken.issue(bob, "uploads")
    lines = "".join(json.dumps({"custom_id": f"r{n}", "method": "POST", "url": "/v1/completions",
                                "body": {"prompt": "Once"}}) + "\n" for n in range(3))
    for _ in range(2):
        upload = SimpleUploadedFile("lines.jsonl", lines.encode(), content_type="application/jsonl")
        answer = Client().post("/api/batches/", {"file": upload}, HTTP_AUTHORIZATION=f"Bearer {key}")
        assert answer.status_code == 201, answer.content
        assert answer.json()["held"] and answer.json()["counts"]["queued"] == 3
    assert Job.objects.filter(batch__isnull=False, api_token=token).count() == 6
