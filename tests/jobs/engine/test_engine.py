"""The engine on a real deployment: tokens stream to a socket one by one and equal a single-process run, and Verify
finds the laptops' answer identical to the head alone; cancel stops within a token; a prompt longer than the
context fails saying so. A laptop killed mid-answer: tests/jobs/recovery/."""

import os
import signal
import time

import redis.asyncio
from django.conf import settings

from jobs.engine import verify
from jobs.models import Job, JobKind, JobStatus
from jobs.queue import queueing
from models_app.llamacpp import oneshot
from models_app.models import Deployment
from tests.conftest import wait_until
from tests.jobs.cluster import GREEDY, chat, listen

QUESTION = "Name three colours and say one thing about each."


def test_a_chat_streams_token_by_token_and_equals_a_single_process_run(cluster, bob):
    job = chat(cluster, bob, QUESTION, max_tokens=32)
    events = listen(job, bob)
    tokens = [e for e in events if e["event"] == "token"]
    assert len(tokens) == 32, "one message per generated token"
    assert [e["seq"] for e in tokens] == sorted(e["seq"] for e in tokens)
    done = events[-1]
    assert done["status"] == JobStatus.SUCCEEDED and done["timings"]["completion_tokens"] == 32
    assert done["timings"]["time_to_first_token_s"] > 0 and done["timings"]["tokens_per_s"] > 0
    reference = oneshot.complete([], "", 32, ctx=cluster.ctx, chat=[{"role": "user", "content": QUESTION}])
    assert "".join(e["text"] for e in tokens) == reference["text"] == Job.objects.get(pk=job.pk).output
    assert [e["text"] for e in tokens] == reference["pieces"]

    # Verify, on the same deployment: the laptops' greedy answer against the head alone.
    report = verify.verify(cluster)
    assert report["result"] == "identical", report
    cluster.refresh_from_db()
    assert cluster.verification["result"] == "identical" and cluster.verification["distributed"]


def test_a_socket_opened_mid_stream_gets_everything_once_and_a_too_long_prompt_fails_with_the_numbers(
        cluster, bob):
    job = chat(cluster, bob, QUESTION, max_tokens=48)
    wait_until(lambda: len(queueing.stream.kept(job.pk)) > 10, 60, "ten tokens out")
    events = listen(job, bob)
    seqs = [e["seq"] for e in events if "seq" in e]
    assert seqs == list(range(1, len(seqs) + 1)), "every event once, in order, from the first"
    assert "".join(e["text"] for e in events if e["event"] == "token") == Job.objects.get(pk=job.pk).output

    job = queueing.submit(Job(kind=JobKind.COMPLETION, deployment=cluster, user=bob,
                              prompt="word " * 1500, params={**GREEDY, "max_tokens": 8}))
    done = listen(job, bob)[-1]
    assert done["status"] == JobStatus.FAILED
    assert "Context length exceeded" in done["error"] and "1024" in done["error"]


def test_cancel_stops_generation_within_one_token(cluster, bob):
    """Counted from the moment the engine can know: the engine is paused (SIGSTOP) while the cancel travels
    socket → consumer → Redis → the engine's subscriber, so a busy machine's delivery time is not counted."""
    job = chat(cluster, bob, QUESTION, max_tokens=2000)
    engine = Deployment.objects.get(pk=cluster.pk).engine["worker"]
    asked = {}

    async def cancel_after_five(comm, events):
        if "at" in asked or sum(e["event"] == "token" for e in events) < 5:
            return
        watch = redis.asyncio.Redis.from_url(settings.REDIS_URL).pubsub(ignore_subscribe_messages=True)
        await watch.subscribe(queueing.stream.CANCEL_CHANNEL)  # as the engine's own watch does
        os.killpg(engine, signal.SIGSTOP)
        try:
            await comm.send_json_to({"action": "cancel"})
            deadline, message = time.monotonic() + 10, None
            while message is None and time.monotonic() < deadline:  # None too for the subscription's own reply
                message = await watch.get_message(timeout=1)
            assert message and int(message["data"]) == job.pk, "the cancel was published, to the engine too"
            asked["at"] = time.time()
        finally:
            os.killpg(engine, signal.SIGCONT)
            await watch.aclose()

    events = listen(job, bob, on_event=cancel_after_five)
    job.refresh_from_db()
    assert job.status == JobStatus.CANCELLED and job.finish_reason == "cancelled"
    after = [e for e in events if e["event"] == "token" and e["t"] > asked["at"]]
    assert len(after) <= 1, f"{len(after)} tokens came after the cancel"
    assert job.completion_tokens < 20


def test_verify_names_the_first_token_that_differs():
    assert verify.compare(["a", "b", "c"], ["a", "x", "c"])["position"] == 1
    assert verify.compare(["a", "b"], ["a", "b", "c"]) | {} == {
        "result": "different", "position": 2, "reference": "abc", "distributed_token": "(end)",
        "reference_token": "c"}
    assert verify.compare(["a"], ["a"])["result"] == "identical"

