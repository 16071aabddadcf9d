"""A job its engine dropped mid-answer (the engine's worker killed) runs again from its first token, on the same
job. A stream that had sent part of the first attempt follows the second only while it says the same: the same
text goes on from where the client is, without a word twice (or a token's logprobs twice), and a tool call the
client has part of goes on under the id it has; other text or another call (a sampled answer) ends the stream with
the documented `retry_differs` error chunk, never a splice of the two, and the job ends failed with what its
client was told, its retry asked to stop. The chat page's socket says `restart` before the new attempt's events.
The engine's part is played through its own door (jobs/queue/stream.py); the requeue and the claim are the
queue's own (jobs/queue/queueing.py)."""

import json
import threading

import pytest
import requests
from asgiref.sync import async_to_sync, sync_to_async
from channels.testing import WebsocketCommunicator

from clusterpanel.asgi import application
from jobs.api.caught import PARTED
from jobs.models import Job, JobKind, JobStatus
from jobs.queue import ending, queueing, stream
from tests.conftest import wait_until
from tests.jobs.conftest import bearer
from tests.nodes.test_live_updates import headers_for

FIRST = ["Dear ", "Name, ", "I hope "]


@pytest.fixture
def auth(bob) -> dict:
    return {"Authorization": bearer(bob)["HTTP_AUTHORIZATION"]}


class Client(threading.Thread):
    """One streamed request through the web server; its content and its error chunk, as they came."""

    def __init__(self, base: str, auth: dict, **wanted) -> None:
        super().__init__(daemon=True)
        self.base, self.auth, self.wanted, self.content, self.errors, self.ended = base, auth, wanted, [], [], False
        self.calls: dict[int, dict] = {}  # tool calls reassembled from their deltas, as OpenAI's client does
        self.logprobs: list[str] = []  # each token's, as they came

    def run(self) -> None:
        body = {"messages": [{"role": "user", "content": "Write a letter."}], "max_tokens": 64, "stream": True,
                "temperature": 0.8, **self.wanted}
        with requests.post(f"{self.base}/v1/chat/completions", json=body, headers=self.auth, stream=True,
                           timeout=(10, 120)) as response:
            assert response.status_code == 200, response.text
            for line in response.iter_lines(decode_unicode=True):
                if line == "data: [DONE]":
                    self.ended = True
                elif line.startswith("data: "):
                    chunk = json.loads(line[6:])
                    if "error" in chunk:
                        self.errors.append(chunk["error"])
                    for choice in chunk.get("choices", []):
                        self.content.append(choice["delta"].get("content") or "")
                        scored = (choice.get("logprobs") or {}).get("content") or []
                        self.logprobs += [entry["token"] for entry in scored]
                        for delta in choice["delta"].get("tool_calls") or []:
                            call = self.calls.setdefault(delta["index"], {"ids": [], "name": "", "arguments": ""})
                            call["ids"] += [delta["id"]] if delta.get("id") else []
                            call["name"] += delta["function"].get("name") or ""
                            call["arguments"] += delta["function"].get("arguments") or ""


def attempt(job_id: int, number: int, tokens: list[str], calls: list[dict] = (), scored=False) -> stream.JobStream:
    """An engine's attempt at the job: its stream started, and its tokens (each after its logprob, if asked) and
    tool-call deltas sent."""
    out = stream.JobStream(hold_ms=0)
    out.start(job_id, number)
    out.event(job_id, "status", {"status": JobStatus.RUNNING})
    for text in tokens:
        if scored:
            out.event(job_id, "logprob", {"token": text, "logprob": -0.5, "bytes": list(text.encode()),
                                          "top_logprobs": []})
        out.token(job_id, text)
    for delta in calls:
        out.event(job_id, "tool_call", delta)
    out.flush()
    return out


def ended(job: Job, out: stream.JobStream, output: str, tool_calls: list[dict] = ()) -> None:
    """The attempt's end, as the engine writes it."""
    Job.objects.filter(pk=job.pk).update(status=JobStatus.SUCCEEDED, output=output, tool_calls=list(tool_calls),
                                         finish_reason="tool_calls" if tool_calls else "stop")
    job.refresh_from_db()
    out.event(job.pk, "done", job.summary())
    out.flush()


def first_attempt_then_requeued(web_server: str, auth: dict, bob, calls: list[dict] = (), scored=False,
                                **wanted) -> tuple[Client, Job]:
    """A streaming client has the first attempt's tokens (and calls); then the engine died and the job was
    claimed again."""
    client = Client(web_server, auth, **wanted)
    client.start()
    job = wait_until(lambda: Job.objects.filter(user=bob).first(), 30, "the request's job")
    job = queueing.claim(job.pk)
    attempt(job.pk, job.attempts, FIRST, calls, scored)
    arguments = "".join(delta.get("arguments", "") for delta in calls)
    wait_until(lambda: "".join(client.content) == "".join(FIRST)
               and (not calls or client.calls.get(0, {}).get("arguments") == arguments),
               30, "the first attempt's tokens and calls at the client")
    ending.requeue(job)  # what the supervisor does with the jobs of an engine that died
    again = queueing.claim(job.pk)
    assert again.attempts == 2
    return client, again


def test_a_retry_that_says_something_else_ends_the_stream_in_words_and_the_job_with_what_was_told(
        ready, bob, web_server, auth):
    client, job = first_attempt_then_requeued(web_server, auth, bob)
    attempt(job.pk, job.attempts, ["Hello ", "there, ", "friend."])
    client.join(60)
    assert not client.is_alive() and client.ended, "the stream ended"
    assert "".join(client.content) == "".join(FIRST), "nothing of the retry's other text was sent"
    assert [error["code"] for error in client.errors] == ["retry_differs"], client.errors
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and job.output == "".join(FIRST) and job.error == PARTED
    assert stream.store().exists(ending.cancel_key(job.pk)), "its retry is asked to stop"


def test_a_retry_that_says_the_same_goes_on_from_where_the_client_is(ready, bob, web_server, auth):
    client, job = first_attempt_then_requeued(web_server, auth, bob)
    whole = [*FIRST, "this letter ", "finds you well."]
    ended(job, attempt(job.pk, job.attempts, whole), "".join(whole))
    client.join(60)
    assert not client.is_alive() and client.ended and not client.errors, client.errors
    assert "".join(client.content) == "".join(whole), "each word once, in order"


def test_a_retried_answers_logprobs_come_once_for_each_token(ready, bob, web_server, auth):
    client, job = first_attempt_then_requeued(web_server, auth, bob, scored=True, logprobs=True)
    whole = [*FIRST, "this letter ", "finds you well."]
    ended(job, attempt(job.pk, job.attempts, whole, scored=True), "".join(whole))
    client.join(60)
    assert not client.is_alive() and client.ended and not client.errors, client.errors
    assert client.logprobs == whole, "each token's logprobs once, in order"


CALL_BEGUN = [{"index": 0, "id": "call_first", "name": "get_weather"}, {"index": 0, "arguments": '{"city": "Pa'}]


def test_a_retried_tool_call_goes_on_under_the_id_the_client_has(ready, bob, web_server, auth):
    client, job = first_attempt_then_requeued(web_server, auth, bob, calls=CALL_BEGUN)
    again = [{"index": 0, "id": "call_retry", "name": "get_weather"}, {"index": 0, "arguments": '{"city": '},
             {"index": 0, "arguments": '"Paris"}'}, {"index": 1, "id": "call_more", "name": "get_time"},
             {"index": 1, "arguments": "{}"}]
    calls = [{"id": "call_retry", "type": "function",
              "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
             {"id": "call_more", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}]
    ended(job, attempt(job.pk, job.attempts, FIRST, again), "".join(FIRST), calls)
    client.join(60)
    assert not client.is_alive() and client.ended and not client.errors, client.errors
    assert client.calls == {0: {"ids": ["call_first"], "name": "get_weather", "arguments": '{"city": "Paris"}'},
                            1: {"ids": ["call_more"], "name": "get_time", "arguments": "{}"}}, client.calls


@pytest.mark.parametrize("other", ['{"city": "Rome"}', None], ids=["other arguments", "no call"])
def test_a_retry_that_calls_otherwise_ends_the_stream_in_words(ready, bob, web_server, auth, other):
    client, job = first_attempt_then_requeued(web_server, auth, bob, calls=CALL_BEGUN)
    again = [{"index": 0, "id": "call_retry", "name": "get_weather"}, {"index": 0, "arguments": other}] if other else []
    calls = [{"id": "call_retry", "type": "function", "function": {"name": "get_weather", "arguments": other}}]
    ended(job, attempt(job.pk, job.attempts, FIRST, again), "".join(FIRST), calls if other else [])
    client.join(60)
    assert not client.is_alive() and client.ended, "the stream ended"
    assert [error["code"] for error in client.errors] == ["retry_differs"], client.errors
    assert client.calls == {0: {"ids": ["call_first"], "name": "get_weather", "arguments": '{"city": "Pa'}}, \
        "nothing of the retry's other call was sent"


def test_the_chat_pages_socket_says_restart_before_the_new_attempts_events(ready, bob, transactional_db):
    job = Job.objects.create(kind=JobKind.CHAT, deployment=ready, user=bob,
                             messages=[{"role": "user", "content": "Hi"}], params={"max_tokens": 8})
    job = queueing.claim(job.pk)
    attempt(job.pk, job.attempts, ["Hi ", "there"])

    def run_again() -> None:
        ending.requeue(job)
        again = queueing.claim(job.pk)
        attempt(again.pk, again.attempts, ["Hello"])

    headers = headers_for(bob)

    async def scenario() -> list[dict]:
        comm = WebsocketCommunicator(application, f"/ws/jobs/{job.pk}/", headers=headers)
        connected, _ = await comm.connect(timeout=30)
        assert connected
        heard = [await comm.receive_json_from(timeout=30) for _ in range(3)]  # status and two tokens, kept
        await sync_to_async(run_again)()
        while not heard or heard[-1].get("text") != "Hello":
            heard.append(await comm.receive_json_from(timeout=30))
        await comm.disconnect()
        return heard

    heard = async_to_sync(scenario)()
    kinds = [(event["event"], event.get("text") or event.get("attempt")) for event in heard]
    assert kinds == [("status", 1), ("token", "Hi "), ("token", "there"), ("restart", 2), ("status", 2),
                     ("token", "Hello")], kinds  # (a status event's attempt, a token's text)


def test_events_pass_once_in_order_and_a_new_attempt_after_its_restart():
    order = stream.Order()
    first = [{"seq": n, "attempt": 1, "event": "token", "text": str(n)} for n in (1, 2, 3)]
    assert [e for event in [*first, first[1]] for e in order.accept(event)] == first, "each once"
    second = {"seq": 1, "attempt": 2, "event": "token", "text": "a"}
    assert order.accept(second) == [{"event": "restart", "attempt": 2}, second]
    assert order.accept({"seq": 4, "attempt": 1, "event": "token", "text": "4"}) == [], "an ended attempt's"
    assert order.accept({"seq": 3, "attempt": 2, "event": "token", "text": "c"}) and order.gap, "a hole"
    assert order.accept({"event": "queue", "position": 2}) == [{"event": "queue", "position": 2}], "no number"
    late = stream.Order()
    assert late.accept(second) == [second], "a listener that comes during the retry has nothing to restart"
