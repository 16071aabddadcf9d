"""Redis restarted (killed, back empty three seconds later) under three streaming requests at once: each stream
comes live again within seconds of Redis' return, token by token while the engine still generates, and ends
whole and in order; the web server's log says the outage once, not once per request. Before, the engine put its
next try off again with every token it could not send, so the rest came in one piece at the end. The engine's
part is played through its own door (jobs/queue/stream.py) with a token every 50 ms, a fast model's pace."""

import json
import threading
import time

import pytest
import requests
from django.db import connection

from jobs.models import Job, JobStatus
from jobs.queue import stream
from tests.conftest import wait_until
from tests.jobs.conftest import bearer
from tests.services import redis_down

CLIENTS = 3
TOKEN_EVERY_S = 0.05


@pytest.fixture
def web_log(tmp_path):
    return tmp_path / "web.log"


@pytest.fixture
def auth(bob) -> dict:
    return {"Authorization": bearer(bob)["HTTP_AUTHORIZATION"]}


def ask(base: str, auth: dict, lines: list) -> None:
    """Each SSE line with the moment it arrived."""
    body = {"messages": [{"role": "user", "content": "Tell me a story."}], "max_tokens": 500, "stream": True}
    with requests.post(f"{base}/v1/chat/completions", json=body, headers=auth, stream=True,
                       timeout=(10, 120)) as response:
        assert response.status_code == 200, response.text
        for line in response.iter_lines(decode_unicode=True):
            if line and not line.startswith(":"):  # a comment says where a waiting job stands
                lines.append((time.monotonic(), line))


class Engine(threading.Thread):
    """Tokens for every job, one each per TOKEN_EVERY_S, until told to finish; then each job ends."""

    def __init__(self, jobs: list[Job]) -> None:
        super().__init__(daemon=True)
        self.jobs, self.out, self.sent = jobs, stream.JobStream(), {job.pk: [] for job in jobs}
        self.finishing = threading.Event()
        self.ended_at = 0.0

    def run(self) -> None:
        for job in self.jobs:
            self.out.start(job.pk)
            self.out.event(job.pk, "status", {"status": JobStatus.RUNNING})
        n = 0
        while not self.finishing.is_set():
            for job in self.jobs:
                self.sent[job.pk].append(f"w{n} ")
                self.out.token(job.pk, f"w{n} ")
            n += 1
            time.sleep(TOKEN_EVERY_S)
        self.ended_at = time.monotonic()
        for job in self.jobs:
            Job.objects.filter(pk=job.pk).update(status=JobStatus.SUCCEEDED, output="".join(self.sent[job.pk]),
                                                 finish_reason="stop")
            job.refresh_from_db()
            self.out.event(job.pk, "done", job.summary())
        self.out.flush()
        connection.close()  # this thread's own


def contents(lines: list) -> list[tuple[float, str]]:
    chunks = [(at, json.loads(line[6:])) for at, line in lines if line != "data: [DONE]"]
    return [(at, c["choices"][0]["delta"]["content"]) for at, c in chunks
            if c.get("choices") and c["choices"][0]["delta"].get("content")]


def test_streams_come_back_live_soon_after_redis_does(ready, bob, web_server, web_log, auth):
    answers = [[] for _ in range(CLIENTS)]
    clients = [threading.Thread(target=ask, args=(web_server, auth, lines)) for lines in answers]
    for client in clients:
        client.start()
    jobs = wait_until(lambda: len(found := list(Job.objects.filter(user=bob))) == CLIENTS and found, 30,
                      "the requests' jobs")
    Job.objects.filter(user=bob).update(status=JobStatus.RUNNING, attempts=1)  # taken, as an engine takes them
    engine = Engine(jobs)
    engine.start()
    wait_until(lambda: all(contents(lines) for lines in answers), 30, "tokens to reach every client")
    with redis_down():
        time.sleep(3)
    back = time.monotonic()
    time.sleep(8)  # the engine goes on generating after Redis' return
    engine.finishing.set()
    engine.join(30)
    for client in clients:
        client.join(60)
    assert not any(client.is_alive() for client in clients), "a stream hung"

    for job, lines in zip(jobs, answers, strict=True):
        assert lines[-1][1] == "data: [DONE]"
        got = contents(lines)
        assert "".join(text for _, text in got) == "".join(engine.sent[job.pk]), "whole and in order"
        live_again = [at for at, _ in got if back < at < engine.ended_at]
        assert live_again and live_again[0] - back < 5, "the stream came back soon after Redis did"
        assert len(live_again) >= 20, f"token by token while the engine generated, not in one piece at the end " \
                                      f"({len(live_again)} chunks)"
    log = web_log.read_text()
    assert "Traceback" not in log and 1 <= log.count("requests listening") <= 2, "an outage said once, not per request"
