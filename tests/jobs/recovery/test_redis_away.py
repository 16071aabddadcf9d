"""Redis away for good, as people meet it: whatever cannot be queued is refused at once and in words (the API's
503, the chat page's message, a batch all or nothing), and a request already waiting or streaming ends with a
503 or an error chunk and [DONE] once REDIS_OUTAGE_S has passed; never a hang, never an HTML 500. The engine's
part is played here through its own door (jobs/stream.JobStream): this is about the listener."""

import json
import threading
import time

import pytest
import requests
from django.test import Client

from jobs.batches import service as batches
from jobs.models import Batch, Conversation, Job, JobStatus
from jobs.queue import stream
from tests.conftest import wait_until
from tests.jobs.conftest import bearer
from tests.services import redis_down

OUTAGE_S = 3


@pytest.fixture
def web_env() -> dict[str, str]:
    return {"REDIS_OUTAGE_S": str(OUTAGE_S)}


@pytest.fixture
def auth(bob) -> dict:
    return {"Authorization": bearer(bob)["HTTP_AUTHORIZATION"]}


def ask(base: str, auth: dict, into: dict, **body) -> None:
    messages = [{"role": "user", "content": "Hello?"}]
    with requests.post(f"{base}/v1/chat/completions", json={"messages": messages, "max_tokens": 8, **body},
                       headers=auth, stream=True, timeout=(10, 120)) as response:
        into.update(status=response.status_code, lines=[line for line in response.iter_lines(decode_unicode=True)
                                                        if line and not line.startswith(":")])


def test_nothing_is_queued_while_redis_is_away_and_each_door_says_so(ready, bob, web_server, auth):
    browser = Client()
    browser.force_login(bob)
    conversation = Conversation.objects.create(user=bob)
    with redis_down():
        answer = {}
        ask(web_server, auth, answer)
        sent = browser.post(f"/chat/{conversation.pk}/send/", {"text": "Hello?", "deployment": ready.pk},
                            content_type="application/json")
        with pytest.raises(Exception, match="Nothing was queued"):
            batches.from_file(bob, ready, "prompts.csv", b"prompt\nHello?\nGoodbye?\n")
    assert answer["status"] == 503, answer
    error = json.loads(answer["lines"][0])["error"]
    assert error["code"] == "service_unavailable" and "Redis" in error["message"]
    assert error["type"] == "server_error", "OpenAI's shape, as docs/api.md says: not the request's fault"
    assert sent.status_code == 400 and "Redis" in sent.json()["error"]
    assert not Batch.objects.exists() and not Job.objects.filter(batch__isnull=False).exists()
    assert set(Job.objects.values_list("status", flat=True)) == {JobStatus.FAILED}, "none left waiting"


def running(bob) -> Job:
    """The job the web server queued, now taken as an engine takes it."""
    job = wait_until(lambda: Job.objects.filter(user=bob).first(), 30, "the request's job")
    Job.objects.filter(pk=job.pk).update(status=JobStatus.RUNNING, attempts=1)
    return job


def test_a_waiting_request_answers_503_when_redis_stays_away(ready, bob, web_server, auth):
    answer = {}
    client = threading.Thread(target=ask, args=(web_server, auth, answer))
    client.start()
    running(bob)
    time.sleep(1)  # the request listens
    with redis_down():
        client.join(OUTAGE_S + 30)
    assert not client.is_alive(), "the request hung"
    assert answer["status"] == 503, answer
    error = json.loads(answer["lines"][0])["error"]
    assert (error["code"], error["type"]) == ("service_unavailable", "server_error")


def test_a_stream_ends_with_an_error_and_done_when_redis_stays_away(ready, bob, web_server, auth):
    answer = {}
    client = threading.Thread(target=ask, args=(web_server, auth, answer), kwargs={"stream": True})
    client.start()
    job = running(bob)
    engine = stream.JobStream(hold_ms=0)
    engine.start(job.pk)
    engine.event(job.pk, "status", {"status": JobStatus.RUNNING})
    engine.token(job.pk, "Hello")
    engine.flush()
    time.sleep(1)  # the token reaches the client, which has its 200 by now
    with redis_down():
        client.join(OUTAGE_S + 30)
    assert not client.is_alive(), "the stream hung"
    assert answer["status"] == 200 and answer["lines"][-1] == "data: [DONE]", answer
    chunks = [json.loads(line[6:]) for line in answer["lines"][:-1]]
    assert any(c.get("choices") and c["choices"][0]["delta"].get("content") == "Hello" for c in chunks)
    assert chunks[-1]["error"]["code"] == "service_unavailable" and "Redis" in chunks[-1]["error"]["message"]
