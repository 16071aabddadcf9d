"""The engine's side of a job's stream against the real Redis: tokens close together travel in one message
yet reach a listener as one event each, in order; nothing held is lost at the end; a dropped connection
costs the events sent while it was down, not the stream."""

import asyncio
import socket
import time

import redis

from jobs.queue import stream

JOB = 910_001


def listen(job_id: int, until_seq: int, act) -> tuple[list[dict], int]:
    """Events a live subscriber gets while `act()` runs, and how many Redis messages carried them."""

    async def run() -> tuple[list[dict], int]:
        subscription = await stream.Subscription(job_id).open()
        messages, events = 0, []
        real_get = subscription.pubsub.get_message

        async def counting_get(**kwargs):
            nonlocal messages
            message = await real_get(**kwargs)
            messages += message is not None
            return message

        subscription.pubsub.get_message = counting_get
        await asyncio.to_thread(act)
        while not events or events[-1]["seq"] < until_seq:
            event = await subscription.next(timeout=5)
            assert event is not None, f"the stream stopped after {events[-1:]}"
            events.append(event)
        await subscription.close()
        return events, messages

    return asyncio.run(run())


def test_tokens_close_together_travel_together_and_arrive_one_event_each():
    out = stream.JobStream(hold_ms=10_000)  # every token after the first is held until the end

    def act():
        out.start(JOB)
        out.event(JOB, "status", {"status": "running"})
        for n in range(20):
            out.token(JOB, f"t{n} ")
        out.event(JOB, "done", {"status": "succeeded"})
        out.flush()

    events, messages = listen(JOB, 22, act)
    assert [e["seq"] for e in events] == list(range(1, 23))
    assert [e["text"] for e in events if e["event"] == "token"] == [f"t{n} " for n in range(20)]
    assert messages == 3, "status + first token, then the held tokens with done, then nothing else"
    assert [e["seq"] for e in stream.kept(JOB)] == list(range(1, 23)), "kept one entry per event"


def test_tokens_far_apart_go_at_once():
    out = stream.JobStream(hold_ms=1)

    def act():
        out.start(JOB + 1)
        for n in range(5):
            out.token(JOB + 1, str(n))
            time.sleep(0.01)

    events, messages = listen(JOB + 1, 5, act)
    assert [e["text"] for e in events] == ["0", "1", "2", "3", "4"] and messages == 5


def test_a_new_job_sends_what_the_last_one_held():
    out = stream.JobStream(hold_ms=10_000)
    out.start(JOB + 2)
    out.token(JOB + 2, "a")
    out.token(JOB + 2, "b")  # held
    out.start(JOB + 3)
    out.token(JOB + 3, "c")
    out.flush()
    assert [e["text"] for e in stream.kept(JOB + 2)] == ["a", "b"]
    assert [e["text"] for e in stream.kept(JOB + 3)] == ["c"]


def test_after_redis_drops_the_connection_the_next_events_get_through(monkeypatch):
    monkeypatch.setattr(stream, "RETRY_S", 0.05)
    out = stream.JobStream(hold_ms=0)
    out.start(JOB + 4)
    out.token(JOB + 4, "before")
    out.flush()
    host, port = out._connection._sock.getsockname()[:2]
    assert out.redis.client_kill(f"{host}:{port}"), "Redis dropped the stream's connection"
    for _ in range(40):  # the first write after the kill may land in the dead socket's buffer, or fail
        out.token(JOB + 4, "after")
        out.flush()
        if "after" in [e["text"] for e in stream.kept(JOB + 4)]:
            break
        time.sleep(0.05)
    texts = [e["text"] for e in stream.kept(JOB + 4)]
    assert texts[0] == "before" and "after" in texts


def test_while_redis_is_unreachable_tokens_do_not_try_it_one_by_one(caplog):
    out = stream.JobStream(hold_ms=0)
    with socket.socket() as closed:  # a port nobody listens on
        closed.bind(("127.0.0.1", 0))
        out.redis = redis.Redis(port=closed.getsockname()[1], socket_connect_timeout=1)
    attempts = []
    pool = out.redis.connection_pool
    real = pool.connection_class
    pool.connection_class = lambda **kwargs: attempts.append(kwargs) or real(**kwargs)
    for n in range(50):
        out.token(JOB + 5, str(n))
    assert len(attempts) == 1, "one try, then a pause before the next"
    assert attempts[0]["retry"].get_retries() == 0, "and that try is not retried"
    assert caplog.text.count("sending job events to Redis") == 1, "said once, not once per token"


def test_a_redis_that_does_not_answer_is_tried_seldom_and_one_that_refuses_each_second():
    """A Redis host gone silent costs the generating thread the connect timeout at each try: the engine tries it
    every SLOW_RETRY_S. One that refuses at once costs nothing and is tried again within a second."""
    with socket.socket() as silent, socket.socket() as closed:
        silent.bind(("127.0.0.1", 0))
        silent.listen(0)
        closed.bind(("127.0.0.1", 0))
        filler = socket.create_connection(silent.getsockname(), timeout=1)  # its one queue place: the rest hang
        waits = {}
        for name, port in (("silent", silent.getsockname()[1]), ("refusing", closed.getsockname()[1])):
            out = stream.JobStream(hold_ms=0)
            out.redis = redis.Redis(port=port)
            out.token(JOB + 6, "x")
            waits[name] = out._retry_at - time.monotonic()
        filler.close()
    assert waits["silent"] > 5 * stream.RETRY_S and waits["refusing"] <= stream.RETRY_S, waits


def test_a_new_jobs_message_also_wakes_a_busy_engines_watch_at_once(monkeypatch):
    from jobs import task_messages

    monkeypatch.setattr(task_messages, "send", lambda task, args, **options: None)  # no worker here to take it
    channel = stream.new_work_channel("engine.77")
    watch = stream.CancelWatch(stream.store(), channel)
    try:
        deadline = time.monotonic() + 10
        while stream.store().pubsub_numsub(channel)[0][1] < 1 and time.monotonic() < deadline:
            time.sleep(0.05)  # the watch's thread subscribes (again, after a hiccup) on its own time
        assert not watch.take_new_work()
        task_messages.run_job(JOB + 10, "engine.78")  # another deployment's engine
        task_messages.run_job(JOB + 11, "engine.77")
        deadline = time.monotonic() + 5
        while not watch.new_work and time.monotonic() < deadline:
            time.sleep(0.01)
        assert watch.take_new_work() and not watch.take_new_work(), "told once, then the word is taken"
    finally:
        watch.thread.stop()
        watch.thread.join(5)
        watch.pubsub.close()


def test_after_a_dropped_connection_each_running_jobs_stream_is_written_anew_whole_and_once(monkeypatch):
    """Redis may come back empty, and a write into a connection it had closed is lost without an error: the first
    write after a failure rewrites every running job's stream, each event once; an ended job's is left alone."""
    monkeypatch.setattr(stream, "RETRY_S", 0.05)
    out, running, ended = stream.JobStream(hold_ms=0), JOB + 20, JOB + 21
    for job in (running, ended):
        out.start(job)
        out.token(job, "before")
    out.flush()
    out.forget(ended)
    stream.store().delete(stream.key(running), stream.key(ended))  # as a restart leaves them
    host, port = out._connection._sock.getsockname()[:2]
    assert out.redis.client_kill(f"{host}:{port}"), "Redis dropped the stream's connection"
    for n in range(40):
        out.token(running, f"after{n}")
        out.flush()
        if any(e["text"] == f"after{n}" for e in stream.kept(running)):
            break
        time.sleep(0.05)
    events = stream.kept(running)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1)), "whole, in order, each once"
    assert events[0]["text"] == "before" and stream.kept(ended) == []
