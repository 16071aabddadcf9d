"""The dashboard's figures: each deployment's queue, users and engine, what each laptop holds, what failed
lately."""

import time
from datetime import timedelta

from django.db.models import Count, OuterRef, Prefetch, Q, Subquery
from django.urls import reverse
from django.utils import timezone

from clusterpanel.kit.natural import natural_sorted
from jobs.models import Job, JobStatus
from models_app.deploying.activity import engine_load
from models_app.models import Deployment, DeploymentStage
from nodes.metrics import store as metrics
from nodes.models import ActionStatus, LinkCheck, Node, NodeAction, Probe

SHOWN_USERS = 5


def waiting_jobs(deployment_ids: list[int]) -> dict[int, dict[str, int]]:
    """Queued jobs per deployment, interactive ones (chat, the APIs) and batch items apart; one query."""
    rows = (Job.objects.filter(deployment_id__in=deployment_ids, status=JobStatus.QUEUED).values("deployment_id")
            .annotate(interactive=Count("pk", filter=Q(batch__isnull=True)),
                      batch=Count("pk", filter=Q(batch__isnull=False))))
    counts = {pk: {"interactive": 0, "batch": 0} for pk in deployment_ids}
    for row in rows:
        counts[row["deployment_id"]] = {"interactive": row["interactive"], "batch": row["batch"]}
    return counts


def users_of(deployment_ids: list[int]) -> dict[int, dict]:
    """Per deployment: jobs running now, and who has work running or waiting there (first names only)."""
    found = {pk: {"running": 0, "users": []} for pk in deployment_ids}
    rows = (Job.objects.filter(deployment_id__in=deployment_ids, status__in=(JobStatus.QUEUED, JobStatus.RUNNING))
            .values("deployment_id", "user__username").annotate(running=Count("pk", filter=Q(status=JobStatus.RUNNING)))
            .order_by("deployment_id", "user__username"))
    for row in rows:
        entry = found[row["deployment_id"]]
        entry["running"] += row["running"]
        if len(entry["users"]) < SHOWN_USERS:
            entry["users"].append(row["user__username"] or "someone gone")
    return found


def deployment_rows() -> list[dict]:
    """Every active deployment with its queue, who uses it, its engine's load (None: nothing known about
    slots) and the plan's prediction for one person's tokens/s, to read the measured figure against."""
    deployments = list(Deployment.objects.filter(status__in=Deployment.ACTIVE).select_related("model"))
    ids, now = [d.pk for d in deployments], time.time()
    waiting, using = waiting_jobs(ids), users_of(ids)
    return [{"id": d.pk, "name": f"{d.model.name} #{d.pk}", "url": reverse("models:deployment", args=[d.pk]),
             "status": d.status, "label": d.get_status_display(), **waiting[d.pk], **using[d.pk],
             "predicted": predicted(d.plan), "load": engine_load(d.engine, now)}
            for d in deployments]


def predicted(plan) -> float | None:
    rate = plan.get("tokens_per_second") if isinstance(plan, dict) else None
    return round(float(rate), 1) if isinstance(rate, int | float) and not isinstance(rate, bool) else None


def recent_failures(limit: int = 6) -> list[dict]:
    """The newest failures of the last day, of jobs, laptop actions and deployments, newest first."""
    since = timezone.now() - timedelta(days=1)
    jobs = Job.objects.filter(status=JobStatus.FAILED, finished__gte=since).select_related("user").order_by(
        "-finished")[:limit]
    actions = NodeAction.objects.filter(status=ActionStatus.FAILED, finished__gte=since).select_related(
        "node").order_by("-finished")[:limit]
    found = [{"when": j.finished, "what": f"{j.get_kind_display()} job #{j.pk} of {j.user or 'someone gone'}",
              "why": j.error, "url": None} for j in jobs]
    found += [{"when": a.finished, "what": f"{a.get_kind_display()} on {a.node.name}", "why": a.error,
               "url": reverse("nodes:detail", args=[a.node.name])} for a in actions]
    return sorted(found, key=lambda f: f["when"], reverse=True)[:limit]


def held_layers() -> dict[int, list[str]]:
    """Per laptop: what it holds for active deployments, e.g. "smollm2 #3: layers 0–9"."""
    held: dict[int, list[str]] = {}
    stages = DeploymentStage.objects.filter(deployment__status__in=Deployment.ACTIVE).select_related(
        "deployment__model")
    for stage in stages:
        held.setdefault(stage.node_id, []).append(
            f"{stage.deployment.model.name} #{stage.deployment_id}: {stage.layers_held()}")
    return held


def laptops() -> list:
    """Every laptop in natural order (hid5-2 before hid5-10), each with `held`: what it holds (held_layers), and
    `flags`: on battery, throttling, on Wi-Fi (nodes/probing/power.py), from its latest probe and sample."""
    held = held_layers()
    newest = [Prefetch(name, queryset=newest_rows(model)) for name, model in (("probes", Probe),
                                                                             ("link_checks", LinkCheck))]
    nodes = natural_sorted(Node.objects.prefetch_related(*newest), key=lambda node: node.name)
    samples = metrics.latest([node.pk for node in nodes])
    for node in nodes:
        node.held = held.get(node.pk, [])
        node.flags = node.power_flags(samples.get(node.pk))
    return nodes


def newest_rows(model):
    """Each laptop's newest row of `model` (a Probe, a LinkCheck), for a Prefetch."""
    newest = model.objects.filter(node=OuterRef("node")).order_by("-created").values("pk")[:1]
    return model.objects.filter(pk=Subquery(newest))


def own_work(user) -> dict:
    """A plain user's dashboard: the models ready to use, their work in flight, their latest conversations
    and batches."""
    from jobs.batches import service as batch_counts
    from jobs.queue import queueing

    in_flight = list(Job.objects.filter(user=user, status__in=(JobStatus.QUEUED, JobStatus.RUNNING))
                     .select_related("deployment__model").order_by("created")[:20])
    for job in in_flight:
        job.position = queueing.position(job) if job.status == JobStatus.QUEUED else 0
    latest_batches = list(user.batches.select_related("deployment__model")[:5])
    for batch in latest_batches:
        batch.counted = batch_counts.counts(batch)
    return {"ready": queueing.usable_deployments(),
            "in_flight": in_flight, "conversations": user.conversations.all()[:5], "batches": latest_batches}
