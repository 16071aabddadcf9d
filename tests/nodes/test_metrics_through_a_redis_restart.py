"""The metrics collector while Redis is killed and restarted: each laptop's stream goes on (a sample that could
not be kept is let go; the laptop does not look offline, nor does its SSH stream start over), the log says the
outage once and its end with a count, and samples are kept again at once when Redis is back. Before, each
laptop's stream died with a traceback per retry. The laptops' side is played here: this is about what the
collector does with their samples."""

import logging
import time

from clusterpanel.kit.outage import Outage
from nodes.metrics import collector
from nodes.metrics import store as metrics
from nodes.models import Node
from tests.services import redis_down

LAPTOPS = 3


def sample(n: int) -> dict:
    return {"t": round(time.time(), 3), "cpu": 10.0 + n, "ram_used": 1, "ram_available": 2}


def test_each_laptops_stream_goes_on_through_a_redis_restart_and_the_log_says_it_once(db, caplog, monkeypatch):
    monkeypatch.setattr(collector, "KEEPING", Outage(collector.log, "keeping laptops' samples in Redis"), raising=False)
    publisher = collector.Publisher()
    streams = [collector.NodeStream(Node.objects.create(name=f"n{n}", host=f"10.232.0.{n + 10}", username="u"),
                                    publisher, 1.0) for n in range(LAPTOPS)]
    try:
        with caplog.at_level(logging.INFO, logger="nodes.metrics.collector"):
            for stream in streams:
                stream.publish(sample(0))  # pooled connections, which the restart leaves stale
            with redis_down():
                for n in range(1, 4):  # three rounds of samples from every laptop: none raises
                    for stream in streams:
                        stream.publish(sample(n))
            for stream in streams:
                stream.publish(sample(9))
    finally:
        publisher.close()

    assert all(time.monotonic() - stream.last_sample < 10 for stream in streams), "every laptop still online"
    assert [s["cpu"] for s in metrics.recent(streams[0].node_id)] == [19.0], "kept again once Redis is back"
    said = [r.getMessage() for r in caplog.records if "samples in Redis" in r.getMessage()]
    assert len(said) == 2 and "failed" in said[0] and f"after {3 * LAPTOPS} failures" in said[1], said
    assert not any(r.exc_info for r in caplog.records), "no traceback"
