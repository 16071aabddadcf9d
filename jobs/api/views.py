"""/api/jobs/: queue a job, read it, cancel it, list one's own (or everyone's, for lab admins)."""

from typing import Annotated, Any, Literal

from django.db import transaction
from django.http import HttpRequest
from ninja import Field, Query, Router, Schema, Status
from pydantic import BeforeValidator, WithJsonSchema

from clusterpanel.accounts.apiauth import caller, own_or_everyones
from clusterpanel.kit.apikit import ApiError, Input, Page, Paging, errors, paged
from jobs import params
from jobs.api import inputs
from jobs.api.inputs import InputError
from jobs.models import Job, JobKind, JobStatus
from jobs.queue import admission, ending, queueing, routing, wakeup
from models_app.models import Deployment

router = Router()


def checked(check):
    """A field checked by the same function the OpenAI door uses (jobs/api/inputs.py): one rule, one sentence."""
    def validate(value):
        try:
            return check(value, "")
        except InputError as exc:
            raise ValueError(str(exc).lstrip(". ")) from None
    return BeforeValidator(validate)


Text = Annotated[str, checked(inputs.content),
                 WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "array", "items": {
                     "type": "object", "properties": {"type": {"const": "text"}, "text": {"type": "string"}},
                     "required": ["type", "text"]}}]})]


class MessageIn(Input):
    role: Literal["system", "developer", "user", "assistant"]
    content: Text


class JobIn(Input):
    """Generation parameters go inside "params": one at the top is refused as a typo would be."""

    kind: Literal["chat", "completion"] = "chat"
    messages: Annotated[list[MessageIn], Field(min_length=1)] | None = Field(
        None, description="For a chat: the conversation so far, oldest first.")
    prompt: Annotated[str, checked(inputs.prompt)] | None = Field(None, description="For a completion.")
    params: dict[str, Any] | None = Field(None, description=(
        "temperature, top_p, top_k, max_tokens, seed, stop, repeat_penalty; checked as everywhere in the panel "
        "(an unknown one is refused)."))
    model: str | None = Field(None, max_length=200, description=(
        "A model's name: its ready replica that will answer soonest runs the job, and another takes it over if "
        "that one fails while it waits. `deployment-<id>` names one deployment."))
    deployment: int | None = Field(None, description=(
        "A deployment's id: the job runs there and nowhere else. Neither this nor model: the default model."))


class Timings(Schema):
    queue_wait_s: float | None
    time_to_first_token_s: float | None
    prompt_tokens_per_s: float | None
    tokens_per_s: float | None
    total_s: float | None
    prompt_tokens: int | None
    completion_tokens: int | None
    cached_tokens: int | None
    drafted_tokens: int = Field(0, description="Speculative decoding: answer tokens drafted for it.")
    accepted_tokens: int = Field(0, description="Of those, the tokens the model kept.")


class JobOut(Schema):
    id: int
    kind: str
    status: str
    error: str
    output: str
    finish_reason: str | None
    deployment: int | None
    retry: int | None
    timings: Timings
    dropped_messages: int
    user: str | None
    created: str
    position: int = Field(description="1 for the next job to run; 0 when it is not waiting.")
    waiting_on: str = Field(description=(
        "While it waits, where its deployment stands: ready, loading, asleep→loading (an on-call model woken for "
        "it), or waiting for laptops (and why); empty once it runs."))


class JobDetail(JobOut):
    messages: list[dict[str, Any]] | None
    prompt: str
    params: dict[str, Any]


def described(job: Job) -> dict:
    return {**job.summary(), "user": job.user.username if job.user else None, "created": job.created.isoformat(),
            "position": queueing.position(job),
            "waiting_on": wakeup.state_words(job) if job.status == JobStatus.QUEUED else ""}


def visible_jobs(user):
    jobs = Job.objects.select_related("user", "retry").order_by("-created", "-pk")
    return jobs if user.is_lab_admin else jobs.filter(user=user)


@router.post("/", response={201: JobOut, **errors(404, 409, 429, 503)}, summary="Queue a job",
             description="Over a limit of the caller's or of their token's (requests per minute, concurrent jobs, "
                         "tokens per day): 429, with Retry-After in seconds.")
def create_job(request: HttpRequest, payload: JobIn):
    token = getattr(request, "api_token", None)
    job, wanted = new_job(caller(request), payload)
    try:  # before a deployment is chosen: routing may wake an on-call model, and nothing loads for a refusal
        admission.admit(job.user, token)
    except admission.OverLimit as exc:
        raise ApiError(str(exc), 429, retry_after=exc.retry_after) from None
    job.api_token = token
    for last in (False, True):
        routed_by = None
        try:
            with transaction.atomic():  # routed and saved at once: each request of a burst sees those before it
                routed_by = place(job, payload, wanted)
                job = queueing.submit(job)
        except queueing.DeploymentGone as exc:  # an idle one unloaded since it was chosen: routed again, once
            if last or not routed_by:
                raise ApiError(str(exc), 409, "model" if routed_by else "deployment") from None
        except queueing.QueueError as exc:
            raise ApiError(str(exc), 409, "model" if routed_by else "deployment") from None
        except queueing.QueueDown as exc:
            raise ApiError(f"Nothing was queued: Redis, which carries jobs, is unreachable ({exc}). "
                           "Try again in a moment.", 503) from None
        else:
            return Status(201, described(job))


@router.get("/", response={200: Page[JobOut], **errors(403)}, summary="List jobs, newest first")
def list_jobs(request: HttpRequest, *,
              all: bool = Query(False, description="Everyone's (lab admins only)."), paging: Query[Paging]):
    listed = own_or_everyones(request, visible_jobs(caller(request)), all, "jobs")
    return paged(request, listed, described, paging)


def new_job(user, payload: JobIn) -> tuple[Job, params.Params]:
    job = Job(kind=payload.kind, user=user)
    if payload.kind == JobKind.CHAT:
        if payload.messages is None:
            raise ApiError("messages: a chat needs a non-empty list of {role, content} objects.", field="messages")
        job.messages = [{"role": inputs.ROLES[m.role], "content": m.content} for m in payload.messages]
    else:
        if payload.prompt is None:
            raise ApiError("prompt: a completion needs a prompt (a string).", field="prompt")
        job.prompt = payload.prompt
    wanted = checked_params(payload.params, None)  # bad input is refused before a deployment is looked for
    if payload.model is not None and payload.deployment is not None:
        raise ApiError("Give a model or a deployment, not both.", field="deployment")
    return job, wanted


def place(job: Job, payload: JobIn, wanted: params.Params) -> str | None:
    """The job's deployment and its params bounded by that deployment's context; the model it was routed by."""
    tokens = wanted.max_tokens if "max_tokens" in (payload.params or {}) else None
    job.deployment, routed_by = chosen_deployment(payload.deployment, payload.model, tokens)
    job.params = checked_params(payload.params, job.deployment.ctx).as_dict()
    if routed_by:
        job.params = routing.routed(job.params, routed_by)
    return routed_by


def checked_params(raw: dict | None, ctx: int | None) -> params.Params:
    """`raw` as jobs/params.py takes them; max_tokens no more than the deployment's context, once there is one."""
    try:
        return params.validate(raw or {}, max_tokens_limit=ctx)
    except params.ParamError as exc:
        raise ApiError(str(exc), field=f"params.{exc.param}" if exc.param else "params") from None


def chosen_deployment(pk: int | None, model: str | None, tokens: int) -> tuple[Deployment, str | None]:
    """The deployment a job goes to, and the model it was routed by (None: the caller chose the deployment)."""
    try:
        if pk is None:
            target = inputs.target_for(model, tokens)
            return target.deployment, target.model
        deployment = Deployment.objects.filter(pk=pk).first() if 0 < pk < 2**63 else None
        if deployment is None:
            raise ApiError(f"There is no deployment {pk}.", 404, "deployment")
        queueing.check_deployment(deployment)
        return deployment, None
    except InputError as exc:
        field = "params.max_tokens" if exc.param == "max_tokens" else "model" if model is not None else "deployment"
        raise ApiError(str(exc), exc.status, field) from None
    except queueing.QueueError as exc:
        raise ApiError(str(exc), 409, "deployment") from None


def own_job(request: HttpRequest, pk: int) -> Job:
    job = visible_jobs(caller(request)).filter(pk=pk).first() if 0 < pk < 2**63 else None
    if job is None:
        raise ApiError(f"There is no job {pk} of yours.", 404)  # others' ids are not confirmed
    return job


@router.get("/{int:pk}/", response={200: JobDetail, **errors(404)}, summary="A job: status, output, timings")
def job_detail(request: HttpRequest, pk: int):
    job = own_job(request, pk)
    return {**described(job), "messages": job.messages, "prompt": job.prompt, "params": job.params}


@router.post("/{int:pk}/cancel/", response={200: JobOut, **errors(404, 409)}, summary="Cancel a job")
def job_cancel(request: HttpRequest, pk: int):
    job = own_job(request, pk)
    if job.is_finished:
        raise ApiError(f"Job {pk} has already {job.status}.", 409)
    ending.cancel(job)
    job.refresh_from_db()
    return described(job)

