"""Is the distributed model the model? A fixed prompt, greedily, on the deployment and on the head alone.

Greedy decoding makes both runs deterministic, so any difference is a fault
(a layer on the wrong device, a damaged tensor cache, a server of another build);
the report names the first token where they part. The head-only reference needs
the whole model in the head's memory and is skipped, saying so, when it does not fit.
"""

import time

from django.utils import timezone

from jobs.models import Job, JobKind, JobStatus
from jobs.queue import queueing, stream
from models_app.deploying.jobs_above import NotVerifiable
from models_app.llamacpp import oneshot
from models_app.llamacpp.libllama import LlamaCppError
from models_app.models import Deployment
from models_app.planning.records import head_machine

PROMPT = [{"role": "user", "content": "List the planets of the solar system in order, one per line."}]
TOKENS = 48
GREEDY = {"temperature": 0.0, "top_p": 1.0, "top_k": 40, "repeat_penalty": 1.0, "max_tokens": TOKENS, "stop": [],
          "alone": True}  # by itself (jobs/engine/loop.py): beside others, batched arithmetic may part from the head


class NoWorkerReached(NotVerifiable):
    status = 503


def ask(deployment: Deployment, user=None) -> None:
    """Verify it in a worker (the page's button and the API): refused unless it takes jobs."""
    if deployment.status not in queueing.USABLE:
        raise NotVerifiable(f"Only a ready deployment can be verified; this one is "
                            f"{deployment.get_status_display().lower()}.")
    from kombu.exceptions import OperationalError

    from jobs import task_messages

    started = {"started": timezone.now().isoformat()}
    save(deployment, {**started, "result": "running"})
    try:
        task_messages.verify_deployment(deployment.pk, user.pk if user else None)
    except (OperationalError, OSError) as exc:  # no worker can be asked: it must not stay "running"
        why = f"No worker could be asked to verify it (the panel's Redis did not answer: {exc}). Try again soon."
        save(deployment, {**started, "result": "failed", "detail": why})
        raise NoWorkerReached(why) from None


def verify(deployment: Deployment, user=None, within: float = 600) -> dict:
    report = {"started": timezone.now().isoformat(), "prompt": PROMPT[0]["content"], "tokens": TOKENS}
    save(deployment, {**report, "result": "running"})
    job = queueing.submit(Job(kind=JobKind.CHAT, deployment=deployment, user=user, messages=PROMPT,
                              params=GREEDY))
    deadline = time.monotonic() + within
    while not Job.objects.get(pk=job.pk).is_finished and time.monotonic() < deadline:
        time.sleep(0.5)
    job.refresh_from_db()
    if job.status != JobStatus.SUCCEEDED:
        return save(deployment, {**report, "job": job.pk, "result": "failed",
                                 "detail": job.error or f"the job is {job.status} after {within:.0f} s"})
    distributed = [e["text"] for e in stream.kept(job.pk) if e.get("event") == "token"]
    report.update(job=job.pk, distributed=job.output)
    need = deployment.model.size + (256 << 20)
    if need > head_machine().usable_bytes:
        return save(deployment, {**report, "result": "no reference",
                                 "detail": f"the model needs about {need / 2**30:.1f} GiB on the head alone, more "
                                           "than it has free; the distributed answer is shown unchecked."})
    # llama.cpp repacks some types (Q4_0 on AVX2) for the head's CPU, and those kernels round apart from the
    # laptops' rpc-servers, which never repack: unless the head holds layers itself, the reference does not either.
    head_layers = any(s.get("machine") == "head" and s.get("count") for s in deployment.plan.get("stages", []))
    try:
        reference = oneshot.complete([], "", TOKENS, model=deployment.model.path, ctx=deployment.ctx, chat=PROMPT,
                                     timeout=within, repack=head_layers)["pieces"]
    except LlamaCppError as exc:
        return save(deployment, {**report, "result": "no reference", "detail": f"the head-only run failed: {exc}"})
    return save(deployment, {**report, **compare(distributed, reference)})


def compare(distributed: list[str], reference: list[str]) -> dict:
    for position, (ours, theirs) in enumerate(zip(distributed, reference, strict=False)):
        if ours != theirs:
            return {"result": "different", "position": position, "distributed_token": ours,
                    "reference_token": theirs, "reference": "".join(reference)}
    if len(distributed) != len(reference):
        position = min(len(distributed), len(reference))
        return {"result": "different", "position": position, "reference": "".join(reference),
                "distributed_token": (distributed[position:] or ["(end)"])[0],
                "reference_token": (reference[position:] or ["(end)"])[0]}
    return {"result": "identical", "reference": "".join(reference)}


def save(deployment: Deployment, report: dict) -> dict:
    Deployment.objects.filter(pk=deployment.pk).update(verification=report)
    from clusterpanel.kit.broadcast import broadcast

    broadcast(f"deployment_{deployment.pk}", "deployment.verification", report)
    return report
