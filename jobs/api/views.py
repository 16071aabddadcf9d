"""The panel's REST API under /api/: jobs (own, or everyone's for lab admins), deployments, laptops."""

from django.http import HttpRequest, JsonResponse

from jobs import params
from jobs.api import inputs
from jobs.api.inputs import InputError
from jobs.api.rest import endpoint, page, problem
from jobs.models import Job, JobKind
from jobs.queue import queueing
from models_app.models import Deployment

KINDS = (JobKind.CHAT, JobKind.COMPLETION)
FIELDS = ("kind", "messages", "prompt", "params", "deployment")


def described(job: Job) -> dict:
    return {**job.summary(), "user": job.user.username if job.user else None, "created": job.created.isoformat(),
            "position": queueing.position(job)}


def visible_jobs(user):
    jobs = Job.objects.select_related("user", "retry").order_by("-created", "-pk")
    return jobs if user.is_lab_admin else jobs.filter(user=user)


@endpoint("GET", "POST")
def jobs(request: HttpRequest) -> JsonResponse:
    if request.method == "POST":
        try:
            job = queueing.submit(new_job(request.user, inputs.json_body(request)))
        except queueing.QueueDown as exc:
            return problem(f"Nothing was queued: Redis, which carries jobs, is unreachable ({exc}). "
                           "Try again in a moment.", 503)
        return JsonResponse(described(job), status=201)
    everyone = request.GET.get("all") in ("1", "true", "yes")
    if everyone and not request.user.is_lab_admin:
        return problem("Only lab admins can list everyone's jobs (?all=1).", 403, "all")
    listed = visible_jobs(request.user)
    return page(request, listed if everyone else listed.filter(user=request.user), described)


def new_job(user, body: dict) -> Job:
    unknown = sorted(set(body) - set(FIELDS))
    if unknown:  # a typo must not pass silently; generation parameters go inside "params"
        raise InputError(f"Unknown field {unknown[0]!r}: a job takes {', '.join(FIELDS)}.", unknown[0])
    kind = body.get("kind", JobKind.CHAT)
    if kind not in KINDS:
        raise InputError(f"kind must be chat or completion, not {kind!r}.", "kind")
    job = Job(kind=kind, user=user)
    if kind == JobKind.CHAT:
        job.messages = inputs.messages(body.get("messages"))
    else:
        job.prompt = inputs.prompt(body.get("prompt"))
    raw = body.get("params") or {}
    if not isinstance(raw, dict):
        raise InputError("params must be an object.", "params")
    job.deployment = chosen_deployment(body.get("deployment"))
    try:
        job.params = params.validate(raw, max_tokens_limit=job.deployment.ctx).as_dict()
    except params.ParamError as exc:
        raise InputError(str(exc), f"params.{exc.param}" if exc.param else "params") from None
    return job


def chosen_deployment(value) -> Deployment:
    if value is None:
        return inputs.deployment_for(None)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError("deployment must be a deployment's id (a whole number).", "deployment")
    deployment = Deployment.objects.filter(pk=value).first()
    if deployment is None:
        raise InputError(f"There is no deployment {value}.", "deployment", status=404)
    try:
        queueing.check_deployment(deployment)
    except queueing.QueueError as exc:
        raise InputError(str(exc), "deployment", status=409) from None
    return deployment


def own_job(request: HttpRequest, pk: int) -> Job:
    job = visible_jobs(request.user).filter(pk=pk).first()
    if job is None:
        raise InputError(f"There is no job {pk} of yours.", status=404)  # others' ids are not confirmed
    return job


@endpoint("GET")
def job_detail(request: HttpRequest, pk: int) -> JsonResponse:
    job = own_job(request, pk)
    return JsonResponse({**described(job), "messages": job.messages, "prompt": job.prompt, "params": job.params})


@endpoint("POST")
def job_cancel(request: HttpRequest, pk: int) -> JsonResponse:
    job = own_job(request, pk)
    if job.is_finished:
        return problem(f"Job {pk} has already {job.status}.", 409)
    queueing.cancel(job)
    job.refresh_from_db()
    return JsonResponse(described(job))


def deployment_summary(deployment: Deployment) -> dict:
    plan = deployment.plan or {}
    return {"id": deployment.pk, "model": deployment.model.name, "model_ids": inputs.model_ids(deployment),
            "status": deployment.status, "ctx": deployment.ctx, "slots": deployment.slots,
            "is_default": deployment.is_default,
            "created": deployment.created.isoformat(),
            "plan": {"mode": plan.get("mode"), "tokens_per_second": plan.get("tokens_per_second"),
                     "bottleneck": plan.get("bottleneck"),
                     "stages": [{"machine": s["machine"], "first_layer": s["first"], "layers": s["count"]}
                                for s in plan.get("stages", [])]}}


@endpoint("GET")
def deployments(request: HttpRequest) -> JsonResponse:
    listed = Deployment.objects.select_related("model").order_by("-is_default", "-created")
    return page(request, listed, deployment_summary)


def node_summary(node) -> dict:
    from nodes import metrics

    latest = (metrics.recent(node.pk, 1) or [None])[-1]
    return {"name": node.name, "host": node.host, "status": node.status, "status_detail": node.status_detail,
            "usable_memory": node.usable_bytes(), "last_seen": node.last_seen and node.last_seen.isoformat(),
            "metrics": latest}


@endpoint("GET")
def nodes(request: HttpRequest) -> JsonResponse:
    from nodes.models import Node

    if not request.user.is_lab_admin:
        return problem("Only lab admins can list the laptops.", 403)
    return page(request, Node.objects.order_by("name"), node_summary)
