"""Edges of the APIs found in review, each held here: a token cannot make one that outlives it; a deleted batch
takes its input file; cancelling a finished batch leaves it finished; names and ids holding a NUL never reach
the database (PostgreSQL's 500); Verify with Redis down says so and does not stay "running"; a job claimed
between being read and cancelled is still stopped; a laptop's history keeps to dates a database can convert;
its "latest" sample is a recent one."""

import json
import time
from datetime import timedelta

from django.test import Client
from django.utils import timezone
from kombu.exceptions import OperationalError

from clusterpanel.accounts.models import ApiToken
from jobs import task_messages
from jobs.batches import service as batches
from jobs.models import ApiFile, Batch, Job, JobKind, JobStatus
from jobs.queue import ending, queueing
from models_app.api.deployments import usable_or_settled
from models_app.models import Deployment
from nodes.metrics import store as metrics
from nodes.models import Node
from tests.jobs.conftest import bearer
from tests.rows import HOST_KEY


def test_a_token_makes_no_token_that_outlives_it(db, bob):
    short, key = ApiToken.issue(bob, "week", expires=timezone.now() + timedelta(days=7))
    made = Client(HTTP_AUTHORIZATION=f"Bearer {key}").post("/api/tokens/", {"name": "forever"}, "application/json")
    assert made.status_code == 201, made.content
    assert ApiToken.objects.get(pk=made.json()["id"]).expires == short.expires


def test_a_deleted_batch_takes_its_input_file_and_a_finished_one_stays_finished(ready, bob):
    line = json.dumps({"custom_id": "a", "method": "POST", "url": "/v1/chat/completions",
                       "body": {"messages": [{"role": "user", "content": "Hi"}]}})
    batch = batches.from_file(bob, ready, "in.jsonl", line.encode())
    assert ApiFile.objects.filter(public_id=batch.input_file_id).exists()
    batch.items.update(status=JobStatus.SUCCEEDED, finished=timezone.now())
    assert batches.cancel_remaining(batch) == 0
    assert Batch.objects.get(pk=batch.pk).cancelled is None, "a finished batch is not made 'cancelled'"
    batches.delete(batch)
    assert not ApiFile.objects.exists(), "its prompts went with it"


def test_names_and_ids_with_a_nul_are_refused_before_any_query(ready, alice, bob):
    key = ApiToken.issue(bob, "client")[1]
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert client.get("/v1/files/file-%00").status_code == 404
    assert client.get("/v1/files?purpose=%00").status_code == 400
    assert client.get("/v1/files?after=file-%00").status_code == 404
    admin = Client(HTTP_AUTHORIZATION=f"Bearer {ApiToken.issue(alice, 'admin')[1]}")
    refused = admin.post("/api/plans/", {"model": "stand\x00in"}, "application/json")
    assert refused.status_code == 400 and "is not a name" in refused.json()["error"]
    assert refused.json()["field"] == "model", "the refusal names its field"


def test_verify_with_redis_down_answers_503_and_does_not_stay_running(ready, alice, monkeypatch):
    def no_broker(*args, **kwargs):
        raise OperationalError("Error 111 connecting to 127.0.0.1:1. Connection refused.")

    monkeypatch.setattr(task_messages, "verify_deployment", no_broker)
    answer = Client(**bearer(alice)).post(f"/api/deployments/{ready.pk}/verify/")
    assert answer.status_code == 503 and "Redis did not answer" in answer.json()["error"], answer.content
    assert Deployment.objects.get(pk=ready.pk).verification["result"] == "failed"


def test_a_degraded_deployment_whose_engine_is_ready_ends_its_event_stream():
    assert usable_or_settled({"status": "degraded", "engine": {"state": "ready"}})
    assert not usable_or_settled({"status": "degraded", "engine": {"state": "loading"}})


def test_a_job_claimed_after_it_was_read_is_still_stopped(ready, bob):
    job = queueing.submit(Job(kind=JobKind.CHAT, deployment=ready, user=bob,
                              messages=[{"role": "user", "content": "Hi"}], params={"max_tokens": 8}))
    read = Job.objects.get(pk=job.pk)  # the API read it waiting...
    queueing.claim(job.pk)  # ...and the engine took it before the cancel
    Deployment.objects.filter(pk=ready.pk).update(status="stopped")  # no engine to ask: it is ended here
    ending.cancel(read)
    stopped = Job.objects.get(pk=job.pk)
    assert stopped.status == JobStatus.CANCELLED and stopped.error.startswith("Stopped."), stopped.error


def test_a_laptops_history_and_latest_sample_keep_to_reason(db, alice):
    node = Node.objects.create(name="lab-1", host="192.0.2.1", username="lab", host_key=HOST_KEY)
    admin = Client(**bearer(alice))
    far = admin.get("/api/nodes/lab-1/metrics/", {"since": "0001-01-01T00:00:00+14:00",
                                                   "until": "0001-01-02T00:00:00+14:00"})
    assert far.status_code == 400 and far.json()["field"] == "since"
    metrics.store().delete(metrics.key(node.pk))
    metrics.append(node.pk, {"t": time.time() - 3600, "cpu": 5.0})
    assert admin.get("/api/nodes/lab-1/metrics/latest/").status_code == 404, "an hour-old sample is not the latest"
    metrics.append(node.pk, {"t": time.time(), "cpu": 7.0})
    assert admin.get("/api/nodes/lab-1/metrics/latest/").json()["cpu"] == 7.0
    metrics.store().delete(metrics.key(node.pk))
