"""Live metrics: one SSH stream per laptop, samples into Redis and out to browsers, offline within 5 s.

Threads read the laptops (paramiko blocks); one asyncio loop owns the channel
layer, so every thread publishes through it instead of opening connections.
"""

import asyncio
import logging
import threading
import time
from datetime import timedelta

import redis
from channels.layers import get_channel_layer
from django.db import close_old_connections
from django.utils import timezone

from clusterpanel.kit.outage import Outage
from nodes.metrics import sampler
from nodes.metrics import store as metrics
from nodes.models import Node, NodeStatus
from nodes.remote import ssh

log = logging.getLogger(__name__)
REDIS_DOWN = (redis.RedisError, OSError)
KEEPING = Outage(log, "keeping laptops' samples in Redis")  # one line per outage, not a traceback per laptop
OFFLINE_AFTER_S = 3.5  # three missed samples; the page shows it within 5 s
WATCHDOG_S = 0.25
WATCHED = (NodeStatus.NEW, NodeStatus.READY, NodeStatus.OFFLINE)


class Publisher:
    """The channel layer, driven by one event loop in its own thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.layer = get_channel_layer()
        self.failing = False
        threading.Thread(target=self.loop.run_forever, name="publisher", daemon=True).start()

    def send(self, group: str, event_type: str, payload: dict) -> None:
        message = {"type": event_type, "payload": payload}
        future = asyncio.run_coroutine_threadsafe(self.layer.group_send(group, message), self.loop)
        future.add_done_callback(self.sent)

    def sent(self, future) -> None:
        """Say when sending to browsers starts failing (Redis down) and when it works again; not every sample."""
        error = None if future.cancelled() else future.exception()
        if error is not None and not self.failing:
            log.error("sending samples to browsers failed: %r; going on (said once until it works again)", error)
        elif error is None and self.failing:
            log.info("sending samples to browsers works again")
        self.failing = error is not None

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)


class NodeStream(threading.Thread):
    """Reads one laptop's sampling loop for as long as the collector wants it."""

    def __init__(self, node: Node, publisher: Publisher, interval: float) -> None:
        super().__init__(name=f"metrics-{node.name}", daemon=True)
        self.node_id, self.name, self.target = node.pk, node.name, node.ssh_target()
        self.publisher, self.interval = publisher, interval
        self.last_sample = 0.0
        self.said_offline = False  # told to pages, by the collector's watchdog or its round
        self.unreachable = False
        self.started = time.monotonic()
        self.stopped = threading.Event()

    def run(self) -> None:
        backoff = 1.0
        while not self.stopped.is_set():
            try:
                self.read()
            except ssh.SSHError as exc:
                # One line when the laptop goes away, not one per retry; `publish` says when it is back.
                (log.debug if self.unreachable else log.warning)("metrics from %s: %s", self.name, exc)
                self.unreachable = True
            except Exception:  # a bug: this laptop's stream starts again, the others never notice
                log.exception("metrics from %s failed", self.name)
            self.stopped.wait(backoff)
            backoff = min(backoff * 2, 5.0)

    def read(self) -> None:
        feed = sampler.Sampler()
        for line in ssh.stream(self.target, sampler.SCRIPT, str(self.interval), idle_timeout=OFFLINE_AFTER_S):
            if self.stopped.is_set():
                return
            sample = feed.feed(line)
            if sample:
                self.publish(sample)

    def publish(self, sample: dict) -> None:
        if self.unreachable:
            self.unreachable = False
            log.info("metrics from %s: reachable again", self.name)
        self.last_sample = time.monotonic()
        sample["received"] = round(time.time(), 3)
        try:
            metrics.append(self.node_id, sample)
        except REDIS_DOWN as exc:  # the window misses a sample; the stream goes on, and the laptop stays online
            KEEPING.failed(exc)
        else:
            KEEPING.over()
        payload = {"node": self.node_id, "name": self.name, **sample}
        self.publisher.send(f"node_{self.node_id}", "node.metrics", payload)
        self.publisher.send("dashboard", "dashboard.metrics", payload)

    def quiet_for(self) -> float:
        return time.monotonic() - max(self.last_sample, self.started)

    def stop(self) -> None:
        self.stopped.set()
        ssh.forget(self.target)


class Collector:
    def __init__(self, interval: float = 1.0) -> None:
        self.interval = interval
        self.publisher = Publisher()
        self.streams: dict[int, NodeStream] = {}
        self.online: dict[int, bool] = {}
        self.last_downsample = 0.0
        self.closing = threading.Event()
        threading.Thread(target=self.watchdog, name="offline-watchdog", daemon=True).start()

    def watchdog(self) -> None:
        """Pages hear that a laptop went quiet from here, a thread that touches no database: a round waits
        seconds behind another process's write on a busy SQLite, and the page is promised "offline" within 5 s.
        The round writes the row (and tells pages itself if this thread has not yet)."""
        while not self.closing.wait(WATCHDOG_S):
            for node_id, stream in list(self.streams.items()):
                if stream.quiet_for() >= OFFLINE_AFTER_S and self.online.get(node_id) is not False:
                    self.say_offline(node_id, stream)

    def say_offline(self, node_id: int, stream: NodeStream) -> None:
        if not stream.said_offline:
            stream.said_offline = True
            self.announce(node_id, stream.name, "offline")

    def tick(self) -> None:
        """One round over every watched laptop; one laptop's failure is logged and the others still get theirs."""
        close_old_connections()
        nodes = {node.pk: node for node in Node.objects.filter(status__in=WATCHED)}
        for node_id in set(self.streams) - set(nodes):
            self.streams.pop(node_id).stop()
        for node in nodes.values():
            try:
                self.keep_streaming(node)
            except Exception:
                log.exception("metrics of %s: this round failed", node.name)
        if time.monotonic() - self.last_downsample > 60:
            self.last_downsample = time.monotonic()
            self.downsample(nodes.values())

    def keep_streaming(self, node: Node) -> None:
        stream = self.streams.get(node.pk)
        if stream is None or stream.target != node.ssh_target() or not stream.is_alive():
            if stream:
                stream.stop()
            self.streams[node.pk] = NodeStream(node, self.publisher, self.interval)
            self.streams[node.pk].start()
        self.watch(node, self.streams[node.pk])

    @staticmethod
    def downsample(nodes) -> None:
        for node in nodes:
            try:
                metrics.downsample(node)
            except REDIS_DOWN as exc:  # the next round keeps those minutes: the window holds an hour
                KEEPING.failed(exc)
            except Exception:
                log.exception("metrics of %s: keeping its minutes failed", node.name)
        metrics.prune()

    def watch(self, node: Node, stream: NodeStream) -> None:
        """Mark a laptop offline when its samples stop, and ready again when they come back."""
        quiet = stream.quiet_for()
        was_online = self.online.get(node.pk)
        if stream.last_sample and quiet < OFFLINE_AFTER_S:
            # Others mark a laptop offline too (an action whose SSH failed a moment): its samples say otherwise,
            # and an offline laptop takes its deployment out of service, so the row follows the samples.
            if was_online is not True or node.status == NodeStatus.OFFLINE or stream.said_offline:
                # Pages hear first: the row's write can wait seconds on a busy database. Only once written is
                # it remembered, so a failed write is tried (and announced) again next round.
                stream.said_offline = False
                self.announce(node.pk, node.name, "ready")
                node.set_status(NodeStatus.READY)
                self.online[node.pk] = True
            elif node.last_seen is None or timezone.now() - node.last_seen > timedelta(seconds=30):
                Node.objects.filter(pk=node.pk).update(last_seen=timezone.now())
        elif quiet >= OFFLINE_AFTER_S and was_online is not False:
            self.say_offline(node.pk, stream)
            node.set_status(NodeStatus.OFFLINE, f"No metrics for {OFFLINE_AFTER_S:.0f} s: the laptop is off "
                                                "the network, asleep or overloaded.")
            self.online[node.pk] = False

    def announce(self, node_id: int, name: str, state: str) -> None:
        payload = {"node": node_id, "name": name, "state": state, "t": round(time.time(), 3)}
        self.publisher.send(f"node_{node_id}", "node.state", payload)
        self.publisher.send("dashboard", "dashboard.state", payload)

    def close(self) -> None:
        self.closing.set()
        for stream in self.streams.values():
            stream.stop()
        self.publisher.close()
