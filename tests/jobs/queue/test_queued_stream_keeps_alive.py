"""A streamed request that has to wait answers at once and keeps talking: its headers and an SSE comment saying
where it stands come within a second, another comment every STREAM_KEEPALIVE_S while it waits, so a client whose
read timeout is shorter than the wait still gets its answer. Several clients wait at once, for longer than their
timeout. The engine is played through its own door (jobs/queue/stream.py), as in test_streams_come_back_live.py.
Before, a queued stream sent nothing until its first token: a client with a 60 s read timeout gave up behind two
long answers."""

import threading
import time

import openai
import pytest
import requests
from django.db import connection

from clusterpanel.accounts.models import ApiToken
from jobs.models import Job, JobKind, JobStatus
from jobs.queue import stream
from tests.conftest import wait_until
from tests.jobs.standins import engine

KEEPALIVE_S = 2
CLIENT_TIMEOUT_S = 8  # a busy test machine once took over 3 s to answer at all
WAITS_S = 2 * CLIENT_TIMEOUT_S  # longer than the clients' read timeout
CLIENTS = 3
HI = [{"role": "user", "content": "Say hello."}]


@pytest.fixture
def web_env() -> dict[str, str]:
    return {"STREAM_KEEPALIVE_S": str(KEEPALIVE_S)}


@pytest.fixture
def busy(ready, bob):
    """`ready` with its one slot taken by a long job: whatever comes next waits."""
    ready.engine, ready.slots = engine(slots=1, busy=1), 1
    ready.save(update_fields=["engine", "slots"])
    Job.objects.create(kind=JobKind.CHAT, deployment=ready, user=bob, messages=HI, status=JobStatus.RUNNING,
                       attempts=1)
    return ready


def answer(jobs: list[Job], words: str) -> None:
    """The engine's part: each job runs, says `words` a word at a time, and ends."""
    out = stream.JobStream()
    for job in jobs:
        Job.objects.filter(pk=job.pk).update(status=JobStatus.RUNNING, attempts=1)
        out.start(job.pk)
        out.event(job.pk, "status", {"status": JobStatus.RUNNING})
    for word in words.split(" "):
        for job in jobs:
            out.token(job.pk, word + " ")
    for job in jobs:
        Job.objects.filter(pk=job.pk).update(status=JobStatus.SUCCEEDED, output=f"{words} ", finish_reason="stop",
                                             completion_tokens=len(words.split(" ")))
        job.refresh_from_db()
        out.event(job.pk, "done", job.summary())
    out.flush()
    connection.close()


def test_a_waiting_stream_answers_at_once_and_says_where_it_stands(busy, bob, web_server):
    key = ApiToken.issue(bob, "raw")[1]
    body = {"model": "tiny", "messages": HI, "max_tokens": 8, "stream": True}
    started = time.monotonic()
    with requests.post(f"{web_server}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"},
                       stream=True, timeout=(10, CLIENT_TIMEOUT_S)) as response:
        assert response.status_code == 200 and response.headers["Content-Type"] == "text/event-stream"
        lines = response.iter_lines(decode_unicode=True)
        first = next(line for line in lines if line)
        # It came within the client's read timeout, and no token ever comes in this test: not at the first token.
        assert first.startswith(": queued, next in line on deployment #") and "1 of its 1 slots busy" in first, first
        comments = [first] + [next(line for line in lines if line) for _ in range(3)]
        assert all(line.startswith(": queued") for line in comments), comments
        assert time.monotonic() - started >= 3 * KEEPALIVE_S * 0.8, "one comment each STREAM_KEEPALIVE_S"
        job = Job.objects.get(user=bob, status=JobStatus.QUEUED)
    assert wait_until(lambda: Job.objects.get(pk=job.pk).status == JobStatus.CANCELLED, 30,
                      "the job of a client that went away while it waited cancelled")


def test_several_clients_with_short_timeouts_wait_longer_than_them_and_get_their_answers(busy, bob, web_server):
    api = openai.OpenAI(base_url=f"{web_server}/v1", api_key=ApiToken.issue(bob, "short")[1], max_retries=0,
                        timeout=CLIENT_TIMEOUT_S)
    got: dict[int, str | Exception] = {}

    def ask(n: int) -> None:
        try:
            chunks = api.chat.completions.create(model="tiny", messages=HI, max_tokens=8, stream=True)
            got[n] = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
        except Exception as exc:  # noqa: BLE001 (the test says which client failed and how)
            got[n] = exc

    clients = [threading.Thread(target=ask, args=(n,)) for n in range(CLIENTS)]
    for client in clients:
        client.start()
    jobs = wait_until(lambda: len(found := list(Job.objects.filter(status=JobStatus.QUEUED))) == CLIENTS and found,
                      30, "every request queued")
    time.sleep(WAITS_S)
    assert not got, f"a client gave up while it waited: {got}"
    answer(jobs, "hello there friend")
    for client in clients:
        client.join(60)
    assert got == {n: "hello there friend " for n in range(CLIENTS)}, got

