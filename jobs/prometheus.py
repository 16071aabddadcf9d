"""/metrics in the Prometheus text format: the lab's laptops, rpc-servers, deployments, jobs and batches, read
from where the pages read them (the database, and Redis for the latest samples and running answers) at each
scrape, so every process's work is counted and nothing is kept twice.

Names follow Prometheus conventions: a `clusterpanel_` prefix, base units (bytes, seconds, ratios 0–1),
`_total` for counters. The network rates are gauges of bytes per second because that is what the laptops'
sampler measures (a laptop's own counters restart with it).
"""

import time
from collections.abc import Iterator

from django.conf import settings
from django.db.models import Count, Exists, F, FloatField, OuterRef, Q, Sum, Value
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from jobs.models import HISTOGRAM_BUCKETS, TALLIED_SECONDS, Batch, Job, JobStatus, Tally, Usage, awaiting_retry
from jobs.queue import stream
from models_app.models import Deployment, DeploymentStatus
from nodes.metrics import store as metrics
from nodes.models import Node, NodeStatus, RpcServer, ServerStatus

BUCKETS = HISTOGRAM_BUCKETS
SAMPLE_FRESH_S = 10  # an older sample is a laptop's last words, not its state


class PanelCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        yield from laptops()
        yield from servers()
        yield from deployments()
        yield from batches()
        yield from people()


def laptops() -> Iterator[Metric]:
    up = GaugeMetricFamily("clusterpanel_node_up", "1 when the laptop answers and is ready.", labels=["node"])
    gauges = {name: GaugeMetricFamily(f"clusterpanel_node_{name}", text, labels=["node"]) for name, text in (
        ("cpu_ratio", "Share of the laptop's CPU time busy, 0–1, over the last second."),
        ("memory_used_bytes", "Memory in use on the laptop."),
        ("memory_available_bytes", "Memory the laptop could still give."),
        ("swap_used_bytes", "Swap in use on the laptop."),
        ("network_receive_bytes_per_second", "Bytes per second the laptop received, over the last second."),
        ("network_transmit_bytes_per_second", "Bytes per second the laptop sent, over the last second."),
        ("temperature_celsius", "The laptop's CPU temperature, where it says."),
    )}
    nodes = list(Node.objects.only("pk", "name", "status"))
    samples, now = metrics.latest([node.pk for node in nodes]), time.time()
    for node in nodes:
        up.add_metric([node.name], float(node.status == NodeStatus.READY))
        latest = samples.get(node.pk)
        if latest is None or now - latest.get("t", 0) > SAMPLE_FRESH_S:
            continue  # offline: no value rather than a frozen one
        values = {"cpu_ratio": latest.get("cpu", 0) / 100, "memory_used_bytes": latest.get("ram_used"),
                  "memory_available_bytes": latest.get("ram_available"), "swap_used_bytes": latest.get("swap_used"),
                  "network_receive_bytes_per_second": latest.get("rx"),
                  "network_transmit_bytes_per_second": latest.get("tx"), "temperature_celsius": latest.get("temp")}
        for name, value in values.items():
            if value is not None:
                gauges[name].add_metric([node.name], float(value))
    yield up
    yield from gauges.values()


def servers() -> Iterator[Metric]:
    up = GaugeMetricFamily("clusterpanel_rpc_server_up", "1 when the rpc-server runs.", labels=["node", "port"])
    restarts = CounterMetricFamily("clusterpanel_rpc_server_restarts", "Times the supervisor restarted it.",
                                   labels=["node", "port"])
    for server in RpcServer.objects.filter(wanted=True).select_related("node"):
        labels = [server.node.name, str(server.port)]
        up.add_metric(labels, float(server.status == ServerStatus.RUNNING))
        restarts.add_metric(labels, float(server.restarts))
    yield up
    yield restarts


def deployments() -> Iterator[Metric]:
    labels = ["deployment", "model"]
    state = GaugeMetricFamily("clusterpanel_deployment_state", "1 for the deployment's current state.",
                              labels=[*labels, "state"])
    slots = GaugeMetricFamily("clusterpanel_deployment_slots", "Jobs its engine can run at once.", labels=labels)
    busy = GaugeMetricFamily("clusterpanel_deployment_slots_busy", "Jobs its engine runs now.", labels=labels)
    queue = GaugeMetricFamily("clusterpanel_deployment_queue_depth", "Jobs waiting for it.", labels=labels)
    tokens = CounterMetricFamily("clusterpanel_tokens_generated", "Tokens it generated, running answers included.",
                                 labels=labels)
    ttft = HistogramMetricFamily("clusterpanel_time_to_first_token_seconds",
                                 "From a job's start to its first token.", labels=labels)
    duration = HistogramMetricFamily("clusterpanel_job_duration_seconds", "From a job's start to its end.",
                                     labels=labels)
    drafting = {name: GaugeMetricFamily(f"clusterpanel_deployment_{name}", text, labels=labels) for name, text in (
        ("draft_tokens", "Most tokens an answer drafts per step (speculative decoding by n-gram drafting; 0: off)."),
        ("draft_kept_ratio", "Share of drafted tokens its steps kept, over the engine's last few seconds."),
        ("tokens_per_trip", "Tokens made per step through the model, over the engine's last few seconds."),
    )}
    shown = list(Deployment.objects.exclude(status=DeploymentStatus.STOPPED).select_related("model"))
    counted = job_counts([d.pk for d in shown])
    for deployment in shown:
        names = [str(deployment.pk), deployment.model.name]
        for choice in DeploymentStatus.values:
            state.add_metric([*names, choice], float(deployment.status == choice))
        slots.add_metric(names, float(deployment.slots))
        found = counted.get(deployment.pk, {})
        queue.add_metric(names, float(found.get("waiting", 0)))
        busy.add_metric(names, float(len(found.get("running", []))))
        if found.get("generated") is not None:
            tokens.add_metric(names, float(found["generated"]))
        ttft.add_metric(names, *found.get("time_to_first_token_s", EMPTY))
        duration.add_metric(names, *found.get("duration_s", EMPTY))
        drafting["draft_tokens"].add_metric(names, float(deployment.draft_tokens))
        report = (deployment.engine or {}).get("draft") or {}
        for name, key in (("draft_kept_ratio", "kept"), ("tokens_per_trip", "per_trip")):
            if isinstance(report.get(key), int | float):
                drafting[name].add_metric(names, float(report[key]))
    yield from (state, slots, busy, queue, tokens, ttft, duration, *drafting.values())


EMPTY = ([*((floatToGoString(b), 0.0) for b in BUCKETS), ("+Inf", 0.0)], 0.0)


def job_counts(deployment_ids: list[int]) -> dict[int, dict]:
    """Per deployment: waiting and running jobs, tokens generated (the ended jobs' tally, and running answers'
    tokens from their streams), and the histograms of the ended jobs' seconds. The tallies and the running jobs
    come from one statement, so a job ending meanwhile is counted once: in its stream, or in the tally."""
    if not deployment_ids:
        return {}
    tallies = Tally.objects.filter(deployment__in=deployment_ids).order_by().values_list("deployment", "name", "bucket",
                                                                               "count", "total")
    running = Job.objects.filter(deployment__in=deployment_ids, status=JobStatus.RUNNING).order_by().annotate(
        name=Value(RUNNING), bucket=Value(0), count=F("pk"), total=Value(0.0, output_field=FloatField())
    ).values_list("deployment", "name", "bucket", "count", "total")
    counted = {pk: {"waiting": 0, "running": [], "tallied": 0, **{name: [0] * (len(BUCKETS) + 1) for name in SECONDS},
                    "sums": {}} for pk in deployment_ids}
    for pk, name, bucket, count, total in tallies.union(running, all=True):
        found = counted[pk]
        if name == RUNNING:
            found["running"].append(count)
        elif name == "tokens":
            found["tallied"] = count
        elif name in SECONDS and bucket <= len(BUCKETS):
            found[name][bucket] = count
            if bucket == len(BUCKETS):
                found["sums"][name] = total
    waiting = Job.objects.filter(deployment__in=deployment_ids, status=JobStatus.QUEUED).values(
        "deployment").order_by().annotate(n=Count("pk"))
    for row in waiting:
        counted[row["deployment"]]["waiting"] = row["n"]
    live = stream.tokens_sent([job for found in counted.values() for job in found["running"]])
    for found in counted.values():
        mine = [live.get(job) for job in found["running"]]
        found["generated"] = None if None in mine else found["tallied"] + sum(mine)
        for name in SECONDS:
            buckets = [*((floatToGoString(b), float(n)) for b, n in zip(BUCKETS, found[name], strict=False)),
                       ("+Inf", float(found[name][-1]))]
            found[name] = (buckets, float(found["sums"].get(name, 0.0)))
    return counted


RUNNING = "running"  # a running job's row among the tallies' (its id in `count`)
SECONDS = TALLIED_SECONDS


def batches() -> Iterator[Metric]:
    unfinished = Job.objects.filter(batch=OuterRef("pk"), retry__isnull=True).filter(
        Q(status__in=(JobStatus.QUEUED, JobStatus.RUNNING)) | awaiting_retry())  # as the Batches page counts
    counted = Batch.objects.filter(Exists(unfinished)).count()
    gauge = GaugeMetricFamily("clusterpanel_batches_in_progress",
                              "Batches with requests still waiting, running or about to be retried.")
    gauge.add_metric([], float(counted))
    yield gauge


def people() -> Iterator[Metric]:
    """Tokens per person, from the usage ledger (it never goes down: deleting a chat keeps what it spent). The
    label stays bounded: the METRICS_TOP_USERS people who spent most have their own series, everyone else
    (and jobs without a user) share "(others)". Someone who joins the top gives "other" a dip once, which
    Prometheus reads as a counter reset; a ranking that changes that rarely is worth the trade."""
    prompt = CounterMetricFamily("clusterpanel_user_prompt_tokens", "Prompt tokens of ended jobs: the model read.",
                                 labels=["user"])
    completion = CounterMetricFamily("clusterpanel_user_completion_tokens",
                                     "Answer tokens of ended jobs: the model wrote.", labels=["user"])
    spent = list(Usage.objects.order_by().values("user__username").annotate(
        p=Sum("prompt_tokens"), c=Sum("completion_tokens")).values_list("user__username", "p", "c"))
    spent.sort(key=lambda row: (row[0] is None, -(row[1] + row[2]), row[0] or ""))
    top = settings.METRICS_TOP_USERS
    named = [row for row in spent[:top] if row[0] is not None]
    others = [row for row in spent if row not in named]
    for name, p, c in named:
        prompt.add_metric([name], float(p))
        completion.add_metric([name], float(c))
    if others:
        prompt.add_metric([OTHER], float(sum(row[1] for row in others)))
        completion.add_metric([OTHER], float(sum(row[2] for row in others)))
    yield from (prompt, completion)


OTHER = "(others)"  # no user name holds parentheses: a person called "other" keeps a series of their own
