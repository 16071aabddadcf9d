"""Every laptop's samples reach a dashboard at 1 Hz; a laptop that drops off is shown offline within 5 s."""

import asyncio
import json
import time

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator

from clusterpanel.asgi import application
from nodes.metrics import store as metrics
from nodes.models import MetricMinute, Node, NodeStatus
from tests.conftest import wait_until
from tests.nodes.laptops import register, set_link
from tests.nodes.test_live_updates import headers_for


@pytest.fixture
def watched(lan, transactional_db):
    the_lan = lan(3)
    return [register(the_lan, laptop) for laptop in the_lan.laptops]


def listen(headers, seconds: float, during=None) -> list[dict]:
    """Everything the dashboard socket receives for `seconds`; `during()` runs once it is open."""

    async def scenario():
        comm = WebsocketCommunicator(application, "/ws/dashboard/", headers=headers)
        connected, _ = await comm.connect(timeout=30)
        assert connected
        received, deadline = [], time.monotonic() + seconds
        if during:
            during()
        while time.monotonic() < deadline:
            try:
                # Not receive_json_from: its timeout would cancel the consumer.
                output = await asyncio.wait_for(comm.output_queue.get(), max(deadline - time.monotonic(), 0.01))
            except TimeoutError:
                break
            message = json.loads(output["text"])
            message["at"] = time.monotonic()
            received.append(message)
        await comm.disconnect()
        return received

    return async_to_sync(scenario)()


def streaming(nodes) -> None:
    """Wait until a new sample of every laptop reaches Redis (its SSH stream is up): seconds on a busy machine.
    (New: an earlier test's laptop may have had the same id.)"""
    since = time.time()
    wait_until(lambda: all(sample["received"] >= since for node in nodes for sample in metrics.recent(node.pk, 1)
                           ) and all(metrics.recent(node.pk, 1) for node in nodes), 60, "every laptop to stream")


def test_it_streams_each_laptop_at_one_sample_a_second(alice, watched, collector):
    headers = headers_for(alice)
    streaming(watched)
    window = time.time() + 1, time.time() + 9
    # Taken by the laptops' clocks, with 5 s more to arrive: four test workers holding both cores once delayed
    # the delivery of samples taken on time by seconds.
    received = listen(headers, 14)
    for node in watched:
        times = [m["t"] for m in received if m["type"] == "metrics" and m["node"] == node.pk
                 and window[0] <= m["t"] <= window[1]]
        assert len(times) >= 5, f"{node}: {len(times)} samples"
        rate = (len(times) - 1) / (times[-1] - times[0])
        assert rate >= 0.9, f"{node}: {rate:.2f} Hz"
        assert Node.objects.get(pk=node.pk).status == NodeStatus.READY
    sample = next(m for m in received if m["type"] == "metrics")
    assert 0 <= sample["cpu"] <= 100 and sample["ram_total"] > 0 and len(sample["cores"]) >= 1
    # Every sample streamed is kept (a count in the window instead once failed on a machine that four test
    # workers held fully busy, which delayed one laptop's sample by seconds).
    streamed = {m["t"] for m in received if m["type"] == "metrics" and m["node"] == watched[0].pk}
    kept = {sample["t"] for sample in metrics.recent(watched[0].pk, 60)}
    assert streamed and streamed <= kept, f"the last hour is kept in Redis: {sorted(streamed - kept)} missing"


def test_it_shows_a_laptop_offline_within_5_s_and_ready_again_by_itself(alice, lan, watched, collector):
    headers = headers_for(alice)
    streaming(watched)
    dropped = watched[1]
    started = {}

    def unplug():
        started["at"] = time.time()
        set_link(lan(3), 2, "down")

    try:
        received = listen(headers, 12, during=unplug)
        offline = [m for m in received if m["type"] == "state" and m["node"] == dropped.pk and m["state"] == "offline"]
        assert offline, "no offline notice"
        # Within 5 s of the laptop's last sample, each moment by the collector's clock: when it read that sample
        # and when it said "offline", not when this busy machine delivered either. (From the test's own unplug it
        # once took 6.1 s in CI: the `ip` command and the samples already on their way came first.)
        last = max(sample["received"] for sample in metrics.recent(dropped.pk, 60)
                   if sample["received"] < offline[0]["t"])
        assert last >= started["at"] - 3, "it streamed until it was unplugged"
        assert offline[0]["t"] - last <= 5.0, offline[0]["t"] - last
        assert Node.objects.get(pk=dropped.pk).status == NodeStatus.OFFLINE
        after = offline[0]["at"]
        others = [m for m in received if m["type"] == "metrics" and m["node"] != dropped.pk and m["at"] > after]
        assert others, "the other laptops kept streaming"
    finally:
        set_link(lan(3), 2, "up")
    back = listen(headers, 20)
    assert any(m["type"] == "state" and m["node"] == dropped.pk and m["state"] == "ready" for m in back)
    assert Node.objects.get(pk=dropped.pk).status == NodeStatus.READY


def test_it_keeps_a_minute_by_minute_history_in_the_database(watched):
    node = watched[0]
    now = time.time() // 60 * 60 - 120  # two finished minutes ago
    for second in range(120):
        metrics.append(node.pk, {"t": now + second, "cpu": 50.0 if second < 60 else 10.0, "ram_used": 100,
                                 "ram_available": 900, "swap_used": 0, "rx": 1000, "tx": 10})
    assert metrics.downsample(node) == 2
    assert metrics.downsample(node) == 0, "a minute is written once"
    minutes = list(MetricMinute.objects.filter(node=node))
    assert [m.cpu for m in minutes] == [50.0, 10.0]
    assert [m.samples for m in minutes] == [60, 60]
    metrics.store().delete(metrics.key(node.pk))


def test_it_marks_ready_again_a_laptop_that_something_else_marked_offline_while_it_streams(watched, collector):
    """An action whose SSH failed for a moment writes its laptop offline; an offline laptop takes its deployment
    out of service, so the samples still arriving put the row right."""
    node = Node.objects.get(pk=watched[0].pk)
    wait_until(lambda: Node.objects.get(pk=node.pk).status == NodeStatus.READY, 20, "the laptop sampled")
    node.set_status(NodeStatus.OFFLINE, "Cannot reach it: it did not answer.")
    wait_until(lambda: Node.objects.get(pk=node.pk).status == NodeStatus.READY, 10, "the laptop ready again")
