"""/metrics for Prometheus: scraped while an answer streams, it parses with prometheus_client's own parser and
shows the job's tokens counting up, then its time to first token and duration in the histograms. Only a lab
admin's token (read-only will do) or an allowed address reads it."""

import threading
import time

import pytest
from django.test import Client, override_settings
from prometheus_client.parser import text_string_to_metric_families

from clusterpanel.accounts.models import ApiToken
from jobs.batches import service as batches
from jobs.engine import loop
from jobs.models import Job, JobKind, JobStatus
from jobs.queue import queueing
from nodes.models import Node, NodeStatus, RpcServer, ServerStatus
from tests.jobs.conftest import engine_child_here, head_deployment
from tests.jobs.standins import ready_deployment
from tests.rows import HOST_KEY

pytestmark = pytest.mark.timeout(300)


def scraped(client: Client) -> dict[tuple, float]:
    answer = client.get("/metrics")
    assert answer.status_code == 200, answer.content
    assert answer["Content-Type"].startswith("text/plain; version=")
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(answer.content.decode()) for sample in family.samples}


def value(found: dict, name: str, **labels) -> float | None:
    return found.get((name, tuple(sorted((k, str(v)) for k, v in labels.items()))))


def test_a_scrape_during_a_streaming_job_shows_its_tokens_counting_up(transactional_db, monkeypatch, alice, bob):
    deployment = head_deployment(slots=1)
    node = Node.objects.create(name="lab-1", host="192.0.2.1", username="lab", host_key=HOST_KEY,
                               status=NodeStatus.READY)
    RpcServer.objects.create(node=node, port=50052, wanted=True, status=ServerStatus.RUNNING, restarts=2)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {ApiToken.issue(alice, 'prometheus', read_only=True)[1]}")
    job = queueing.submit(Job(kind=JobKind.COMPLETION, deployment=deployment, user=bob, prompt="Once upon a time",
                              params={"temperature": 0.0, "top_p": 1.0, "top_k": 40, "repeat_penalty": 1.0,
                                      "max_tokens": 200, "stop": []}))
    names = {"deployment": deployment.pk, "model": deployment.model.name}
    with engine_child_here(deployment, monkeypatch):
        engine = threading.Thread(target=loop.run, args=(job.pk,))
        engine.start()
        counts = []
        while engine.is_alive():
            found = scraped(client)
            if Job.objects.get(pk=job.pk).status == JobStatus.RUNNING:
                counts.append(value(found, "clusterpanel_tokens_generated_total", **names))
            time.sleep(0.05)
        engine.join()
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, job.error
    running = [count for count in counts if count]
    assert len(set(running)) >= 3 and running == sorted(running), f"counting up while it streams: {counts}"

    found = scraped(client)
    assert value(found, "clusterpanel_tokens_generated_total", **names) == job.completion_tokens
    assert value(found, "clusterpanel_job_duration_seconds_count", **names) == 1
    assert value(found, "clusterpanel_time_to_first_token_seconds_bucket", le="+Inf", **names) == 1
    assert value(found, "clusterpanel_deployment_state", state="ready", **names) == 1
    assert value(found, "clusterpanel_deployment_queue_depth", **names) == 0
    assert value(found, "clusterpanel_node_up", node="lab-1") == 1
    assert value(found, "clusterpanel_rpc_server_restarts_total", node="lab-1", port=50052) == 2
    assert value(found, "clusterpanel_batches_in_progress") == 0


def test_only_a_lab_admins_token_or_an_allowed_address_reads_it(db, alice, bob):
    assert Client().get("/metrics").status_code == 401
    assert Client(HTTP_AUTHORIZATION=f"Bearer {ApiToken.issue(bob, 'x')[1]}").get("/metrics").status_code == 403
    assert Client(HTTP_AUTHORIZATION="Bearer cp_nonsense").get("/metrics").status_code == 401
    with override_settings(METRICS_ALLOWED=["127.0.0.0/8"]):
        assert Client().get("/metrics").status_code == 200, "the test client calls from 127.0.0.1"
    with override_settings(METRICS_ALLOWED=["10.0.0.5"]):
        assert Client().get("/metrics").status_code == 401


def test_a_batch_waiting_for_a_retry_is_in_progress(db, alice, bob):
    batch = batches.from_file(bob, ready_deployment(), "one.csv", b"prompt\none\n")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {ApiToken.issue(alice, 'prometheus', read_only=True)[1]}")
    assert value(scraped(client), "clusterpanel_batches_in_progress") == 1, "queued"
    batch.items.update(status=JobStatus.FAILED, error="Stopped: lap-2 stopped answering.")
    assert value(scraped(client), "clusterpanel_batches_in_progress") == 1, "a laptop died: its retry may come"
    batch.items.update(error="Stopped: lap-2 stopped answering. Not retried. Its retries are used up.")
    assert value(scraped(client), "clusterpanel_batches_in_progress") == 0
