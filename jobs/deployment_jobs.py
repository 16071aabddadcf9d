"""The jobs app's answers to what models_app/deploying/jobs_above.py asks about the jobs on a deployment."""

from django.urls import reverse

from jobs.models import Job, JobStatus


def in_flight(deployment) -> tuple[int, int]:
    jobs = deployment.jobs
    return jobs.filter(status=JobStatus.RUNNING).count(), jobs.filter(status=JobStatus.QUEUED).count()


def slot_jobs(deployment, ids: list[int]) -> list[dict]:
    """Each job as the deployment page labels it, with the page to see it on where there is one (a batch
    item's batch; a chat's conversation is its owner's alone)."""
    jobs = Job.objects.filter(deployment=deployment, pk__in=ids).select_related("user")
    return [described(job) for job in jobs]


def described(job: Job) -> dict:
    who = job.user.username if job.user else "someone gone"
    if job.batch_id:
        return {"id": job.pk, "label": f"batch #{job.batch_id}, line {job.line}, of {who}",
                "url": reverse("batches:detail", args=[job.batch_id])}
    return {"id": job.pk, "label": f"{job.get_kind_display().lower()} of {who}", "url": None}


def verify(deployment, user=None) -> None:
    from jobs.engine import verify as verifying  # the engine's modules load when a deployment is verified

    verifying.ask(deployment, user)
