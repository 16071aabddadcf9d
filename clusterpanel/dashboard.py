"""The dashboard's live figures for deployments: the jobs waiting for each, and what its engine is doing."""

import time

from django.db.models import Count, Q
from django.urls import reverse

from jobs.models import Job, JobStatus
from models_app.activity import engine_load
from models_app.models import Deployment


def waiting_jobs(deployment_ids: list[int]) -> dict[int, dict[str, int]]:
    """Queued jobs per deployment, interactive ones (chat, the APIs) and batch items apart; one query."""
    rows = (Job.objects.filter(deployment_id__in=deployment_ids, status=JobStatus.QUEUED).values("deployment_id")
            .annotate(interactive=Count("pk", filter=Q(batch__isnull=True)),
                      batch=Count("pk", filter=Q(batch__isnull=False))))
    counts = {pk: {"interactive": 0, "batch": 0} for pk in deployment_ids}
    for row in rows:
        counts[row["deployment_id"]] = {"interactive": row["interactive"], "batch": row["batch"]}
    return counts


def deployment_rows() -> list[dict]:
    """Every active deployment with its queue and its engine's load (None: nothing known about slots)."""
    deployments = list(Deployment.objects.filter(status__in=Deployment.ACTIVE).select_related("model"))
    waiting, now = waiting_jobs([d.pk for d in deployments]), time.time()
    return [{"id": d.pk, "name": f"{d.model.name} #{d.pk}", "url": reverse("models:deployment", args=[d.pk]),
             "status": d.status, "label": d.get_status_display(), **waiting[d.pk], "load": engine_load(d.engine, now)}
            for d in deployments]
