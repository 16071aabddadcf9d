"""Answers that outlast every timeout in their path, several at once: a streamed and a non-streamed /v1 answer each
last several times the longest of them, and a third request waits quietly in the queue behind both. Every one
ends 200 with every token (the channel layer once killed anything quiet for 5 s).

The timeouts are the web server's, made short (web_env): the channel layer's wait for a message, Redis' read
timeout and the keep-alive comments of a waiting stream. The laptops run at their own speed: the answers are
long enough to outlast those timeouts many times over, on a quiet machine or a loaded one."""

import json
import threading
import time

import pytest
import requests

from clusterpanel.accounts.models import ApiToken
from jobs.models import Job
from tests.conftest import wait_until

SHORT_TIMEOUTS = {"CHANNEL_WAIT_S": 1, "REDIS_READ_TIMEOUT_S": 2, "STREAM_KEEPALIVE_S": 1}
LASTS_AT_LEAST_S = 3 * max(SHORT_TIMEOUTS.values())
LONG = 500  # tokens: about 7.5 s on a quiet machine here (66 tokens/s), half a minute beside a suite
COUNTING = "Count from 1 to 1000 in words, one number per line."


@pytest.fixture
def web_env() -> dict[str, str]:
    return {name: str(seconds) for name, seconds in SHORT_TIMEOUTS.items()}


@pytest.fixture
def cluster_ctx() -> int:
    return 2048


@pytest.fixture
def auth(bob) -> dict:
    return {"Authorization": f"Bearer {ApiToken.issue(bob, 'tests')[1]}"}


def body(tokens: int, **more) -> dict:
    return {"messages": [{"role": "user", "content": COUNTING}], "max_tokens": tokens, "temperature": 0,
            "seed": 1, **more}


def streamed(base: str, auth: dict, tokens: int) -> dict:
    with requests.post(f"{base}/v1/chat/completions", json=body(tokens, stream=True), headers=auth, stream=True,
                       timeout=(10, 120)) as response:
        # Comments (":") say where the queued request stands meanwhile; the answer is in the data lines.
        received = [line for line in response.iter_lines(decode_unicode=True) if line]
    lines = [line for line in received if not line.startswith(":")]
    chunks = [json.loads(line[6:]) for line in lines if line != "data: [DONE]"]
    return {"status": response.status_code, "done": lines[-1] == "data: [DONE]", "id": chunks[0]["id"],
            "text": "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]),
            "errors": [c["error"] for c in chunks if "error" in c], "comments": len(received) - len(lines)}


def whole(base: str, auth: dict, tokens: int) -> dict:
    response = requests.post(f"{base}/v1/chat/completions", json=body(tokens), headers=auth, timeout=(10, 400))
    answer = response.json()
    return {"status": response.status_code, "id": answer.get("id"), "answer": answer}


def job_of(result: dict) -> Job:
    return Job.objects.get(pk=int(result["id"].rsplit("-", 1)[1]))


def test_it_answers_requests_that_outlast_every_timeout_several_at_once(cluster, web_server, auth):
    results: dict[str, dict] = {}
    # The non-streamed request first: its client waits for the whole answer in one read.
    calls = {"whole": lambda: whole(web_server, auth, LONG),
             "streamed": lambda: streamed(web_server, auth, LONG),  # its chunks and comments keep it reading
             "queued": lambda: streamed(web_server, auth, 16)}  # waits behind both, then is short
    threads, raised = [], {}

    def run(name: str, call) -> None:
        try:
            results[name] = call()
        except Exception as exc:  # said in the assertion below, with where each job stands
            raised[name] = repr(exc)

    for name, call in calls.items():
        before = Job.objects.count()
        threads.append(threading.Thread(target=run, args=(name, call)))
        threads[-1].start()
        # In this order in the queue: a fixed pause of 1 s once let a busy machine queue "queued" second.
        wait_until(lambda b=before: Job.objects.count() > b, 60, f"the {name} request to be queued")
    deadline = time.monotonic() + 500
    for thread in threads:
        thread.join(max(deadline - time.monotonic(), 0))

    jobs = [(job.pk, job.status, job.error, job.completion_tokens, job.timings()) for job in Job.objects.order_by("pk")]
    assert set(results) == set(calls), f"a request never came back: only {sorted(results)}; {raised}; {jobs}"
    for name in ("streamed", "queued"):
        got, job = results[name], job_of(results[name])
        assert got["status"] == 200 and got["done"] and not got["errors"], got
        assert got["text"] == job.output != "", f"{name}: the stream lost tokens"
    answer, job = results["whole"]["answer"], job_of(results["whole"])
    assert results["whole"]["status"] == 200, answer
    assert answer["choices"][0]["message"]["content"] == job.output != ""
    assert answer["usage"]["completion_tokens"] == job.completion_tokens
    for name in ("streamed", "whole"):
        job = job_of(results[name])
        assert job.status == "succeeded" and job.completion_tokens == LONG, job.summary()
        assert job.timings()["total_s"] > LASTS_AT_LEAST_S, f"{name} took only {job.timings()['total_s']} s"
    waited = job_of(results["queued"]).timings()["queue_wait_s"]
    assert waited > 2 * LASTS_AT_LEAST_S
    # A comment each STREAM_KEEPALIVE_S while it waited: the short timeouts were the server's.
    assert results["queued"]["comments"] >= waited / SHORT_TIMEOUTS["STREAM_KEEPALIVE_S"] / 2, results["queued"]
