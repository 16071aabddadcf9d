"""Batches by script, the Batches page's own rules: a JSONL or CSV file queued (its bad lines named, a file
with no good line refused whole), read with its counts, cancelled, its results downloaded in both formats,
deleted once nothing runs. One's own batches only; a lab admin sees everyone's."""

import json

from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from jobs.models import Batch, Job, JobStatus
from tests.jobs.conftest import bearer

LINE = {"method": "POST", "url": "/v1/chat/completions", "body": {"messages": [{"role": "user", "content": "Hi"}]}}


def jsonl(*ids: str, bad: int = 0) -> bytes:
    lines = [json.dumps({"custom_id": i, **LINE}) for i in ids] + ["{not json"] * bad
    return "\n".join(lines).encode()


def upload(client: Client, name: str, data: bytes, **fields):
    return client.post("/api/batches/", {"file": SimpleUploadedFile(name, data), **fields})


def test_a_batch_by_script_from_upload_to_deletion(ready, bob, alice):
    client = Client(**bearer(bob))
    made = upload(client, "prompts.jsonl", jsonl("a", "b", "c", bad=1))
    assert made.status_code == 201, made.content
    batch = made.json()
    assert batch["counts"]["total"] == 3 and batch["counts"]["queued"] == 3 and batch["deployment"] == ready.pk
    assert [line["line"] for line in batch["rejected"]] == [4] and batch["rejected"][0]["reason"]
    assert client.get(batch["url"]).json()["counts"]["queued"] == 3

    refused = client.delete(batch["url"])
    assert refused.status_code == 409 and "cancel the remaining" in refused.json()["error"]
    cancelled = client.post(f"{batch['url']}cancel/").json()
    assert cancelled["counts"]["cancelled"] == 3 and cancelled["counts"]["finished"]
    results = client.get(batch["results"]["jsonl"])
    assert results["Content-Type"].startswith("application/jsonl")
    lines = [json.loads(line) for line in results.content.decode().splitlines()]
    assert [line["custom_id"] for line in lines[:3]] == ["a", "b", "c"]
    assert lines[3]["response"]["status_code"] == 400, "the rejected line too"
    assert client.get(batch["results"]["csv"]).content.decode().splitlines()[0].startswith('"line","custom_id"')

    others = Client(**bearer(alice))
    assert others.get(batch["url"]).status_code == 200, "a lab admin sees everyone's"
    assert Client(**bearer(alice)).get("/api/batches/?all=1").json()["count"] == 1
    assert client.get("/api/batches/?all=1").status_code == 403
    assert client.delete(batch["url"]).status_code == 204 and not Batch.objects.exists()
    assert not Job.objects.filter(status=JobStatus.QUEUED).exists()


def test_a_batch_nobody_else_can_reach_and_files_that_cannot_run(ready, bob, db):
    from clusterpanel.accounts.models import Role, User

    carol = User.objects.create_user("carol", "c@example.org", "pw-long-enough-1", role=Role.USER)
    batch = upload(Client(**bearer(bob)), "in.csv", b"prompt\nHello\nWorld\n").json()
    assert batch["counts"]["total"] == 2 and batch["input_format"] == "csv"
    stranger = Client(**bearer(carol))
    for answer in (stranger.get(batch["url"]), stranger.post(f"{batch['url']}cancel/"),
                   stranger.get(batch["results"]["jsonl"]), stranger.delete(batch["url"])):
        assert answer.status_code == 404, answer.content
    assert Job.objects.filter(status=JobStatus.QUEUED).count() == 2, "nothing of bob's was touched"

    bad = upload(Client(**bearer(bob)), "in.jsonl", jsonl(bad=2))
    assert bad.status_code == 400 and bad.json()["field"] == "file" and "line 1:" in bad.json()["error"]
    wrong = upload(Client(**bearer(bob)), "in.jsonl", jsonl("x"), deployment=999)
    assert wrong.status_code == 400 and wrong.json()["field"] == "deployment"
    none = Client(**bearer(bob)).post("/api/batches/", {})
    assert none.status_code == 400 and none.json()["field"] == "file"
    assert Batch.objects.count() == 1
