"""Stand-ins: a deployment that is only a row, for pages and rules that need one ready, not a model running on
laptops; an engine's tokens on a job's stream, for what its listeners were told."""

import time

from jobs.models import Job
from jobs.queue import stream
from models_app.models import Deployment, DeploymentStatus, GgufModel, ModelStatus


def ready_deployment(ctx: int = 1024, status: str = DeploymentStatus.READY) -> Deployment:
    model, _ = GgufModel.objects.get_or_create(
        name="standin", defaults=dict(path="/nonexistent/standin.gguf", size=1, status=ModelStatus.READY,
                                      architecture="llama", n_layer=2, n_embd=8, n_head=1, n_head_kv=1,
                                      context_length=4096, vocab_size=32, file_type="Q4_1", layer_bytes=[1, 1]))
    return Deployment.objects.create(model=model, ctx=ctx, plan={}, status=status)


def engine(slots: int = 2, busy: int = 0, tokens_per_s: float = 0.0, age_s: float = 0.0) -> dict:
    """What a ready engine reports (jobs/engine/child.py set_engine), `age_s` ago."""
    return {"state": "ready", "slots": slots, "busy": busy, "jobs": [], "tokens_per_s": tokens_per_s,
            "at": time.time() - age_s}


def ended_job(deployment: Deployment, user, prompt: int, completion: int, token=None, **fields):
    """A job ended through the engine's own write (child.write_outcome): counted in the usage ledger exactly as
    a job the engine ran would be."""
    from django.utils import timezone

    from jobs.engine import child
    from jobs.models import Job, JobKind, JobStatus

    job = Job.objects.create(kind=fields.pop("kind", JobKind.CHAT), deployment=deployment, user=user,
                             api_token=token, status=JobStatus.RUNNING, attempts=1, started=timezone.now(), **fields)
    assert child.write_outcome(job, status=JobStatus.SUCCEEDED, finished=timezone.now(), prompt_tokens=prompt,
                                completion_tokens=completion)
    job.refresh_from_db()
    return job


def streamed(job: Job, *texts: str) -> str:
    """Tokens sent on the job's stream as its engine sends them, for its current attempt: what a listener heard."""
    out = stream.JobStream(hold_ms=0)
    out.start(job.pk, job.attempts)
    for text in texts:
        out.token(job.pk, text)
    assert out.flush()
    return "".join(texts)
