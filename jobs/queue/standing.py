"""Where a waiting job stands, in words, for a streamed answer that has nothing else to say yet: its place in
the queue and what its engine is doing. None when the job is not waiting: it runs, it ended, or it is next in
line on an engine with a free slot, which takes it at once (so a prompt too long for the context is still told
as a plain error before the stream begins)."""

from jobs.models import Job, JobStatus
from jobs.queue import queueing, wakeup
from models_app.models import DeploymentStatus


def standing(job_id: int) -> str | None:
    job = Job.objects.select_related("deployment").filter(pk=job_id).first()
    if job is None or job.status != JobStatus.QUEUED or job.deployment is None:
        return None
    engine = job.deployment.engine or {}
    place = queueing.position(job)
    if place == 0:  # claimed since it was read: it runs (CI once told a starting job "next in line")
        return None
    # The engine's count is as old as its last report; jobs it claimed since are running in the database.
    running = Job.objects.filter(deployment=job.deployment_id, status=JobStatus.RUNNING).count()
    busy = max(number(engine.get("busy")), running)
    free = max(number(engine.get("slots")) - busy, 0) if taking(job.deployment, engine) else 0
    if place <= free:
        return None
    ahead = f"{place - 1} ahead of it" if place > 1 else "next in line"
    words = engine_words(job.deployment, engine, busy)
    if job.deployment.on_call and (state := wakeup.state_words(job)) != "ready":
        words = f"on call, {state}: {words}"  # e.g. "on call, asleep→loading: the deployment is copying"
    return f"queued, {ahead} on deployment #{job.deployment_id}; {words}"


def standing_now(job_id: int) -> tuple[str | None, bool]:
    """Where the job stands if it waits, and whether it is still queued at all."""
    return standing(job_id), Job.objects.filter(pk=job_id, status=JobStatus.QUEUED).exists()


def taking(deployment, engine: dict) -> bool:
    """Whether the engine's free slots can be believed: it is ready and its deployment serves. Its report may
    be old (an idle engine says nothing until a job comes, and one in a long step cannot speak): a job it has
    not taken within a few seconds gets the comments all the same (jobs/api/openai_views.py UNTAKEN_S)."""
    return engine.get("state") == "ready" and deployment.status == DeploymentStatus.READY


def engine_words(deployment, engine: dict, busy: int) -> str:
    if deployment.status not in queueing.USABLE:
        return f"the deployment is {deployment.get_status_display().lower()}"
    state = engine.get("state")
    if state == "loading":
        return f"its model is loading ({round(float(engine.get('progress') or 0) * 100)} %)"
    if state == "ready":
        slots = number(engine.get("slots"))
        said = f"{min(busy, slots)} of its {slots} slots busy"
        # A job told "0 of its 2 slots busy" while it waited: the free slots were going to the jobs ahead of it.
        return f"{said}, the free ones going to the jobs ahead of it" if busy < slots else said
    return f"its engine is {state}" if state else "its engine is starting"


def number(value) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
