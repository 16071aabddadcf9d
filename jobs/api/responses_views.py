"""/v1/responses and /v1/responses/<id>: OpenAI's Responses API (the subset the openai-agents SDK and Codex CLI
use). Each request is made the chat request it means (jobs/api/responses_api.py) and answered by
/v1/chat/completions' own Answer; `previous_response_id` goes on from that response's job, the caller's own."""

import json

from asgiref.sync import sync_to_async
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from clusterpanel.accounts import apiauth
from jobs.api import inputs, openai_api, responses_api, translated
from jobs.api.inputs import InputError
from jobs.api.openai_submit import REDIS_LOST, submit
from jobs.api.openai_views import Answer, caller, failed, over_limit, refused
from jobs.models import Job, JobKind
from jobs.queue import admission, routing
from jobs.queue.listen import REDIS_DOWN, StreamLost


def own_job(user, response_id, param: str) -> Job:
    """The caller's own job behind a response id; a 404 in words otherwise (another person's is not found)."""
    pk = responses_api.job_id(response_id)
    job = Job.objects.filter(pk=pk, user=user).first() if pk is not None else None
    if job is None:
        raise InputError(f"No response {response_id!r} of yours was found.", param, "not_found", status=404)
    return job


def before(user, body: dict) -> list[dict]:
    if body.get("previous_response_id") is None:
        return []
    previous = own_job(user, body["previous_response_id"], "previous_response_id")
    if not previous.is_finished:
        raise InputError(f"{body['previous_response_id']} has not finished yet.", "previous_response_id")
    return responses_api.history(previous.messages, previous.output, previous.tool_calls)


@login_not_required
@csrf_exempt
async def responses(request: HttpRequest) -> HttpResponse:
    try:
        user = await sync_to_async(caller)(request)
        if request.method != "POST":
            return failed(405, "Use POST.")
        body = inputs.json_body(request)
        chat = responses_api.chat_body(body, await sync_to_async(before)(user, body))
        wanted = openai_api.parse(chat, JobKind.CHAT)
        job, model = await sync_to_async(submit)(user, request.api_token, wanted)
    except apiauth.Unauthorized as exc:
        return refused(exc)
    except InputError as exc:
        return failed(exc.status, str(exc), exc.param, exc.code)
    except admission.OverLimit as exc:
        return over_limit(exc)
    try:
        answer = await Answer(job, wanted, model).respond()
    except (StreamLost, *REDIS_DOWN) as exc:
        return failed(503, f"{REDIS_LOST} ({exc}). Try again in a moment.", code="service_unavailable")
    if isinstance(answer, StreamingHttpResponse):
        return translated.streamed(answer, responses_api.Stream(job.pk, model, body).lines)
    if answer.status_code != 200:
        return answer  # OpenAI's error shape already
    return JsonResponse(responses_api.whole(json.loads(answer.content), job.pk, model, body))


@login_not_required
@csrf_exempt
async def response_detail(request: HttpRequest, response_id: str) -> HttpResponse:
    try:
        user = await sync_to_async(caller)(request)
        job = await sync_to_async(own_job)(user, response_id, "response_id")
    except apiauth.Unauthorized as exc:
        return refused(exc)
    except InputError as exc:
        return failed(exc.status, str(exc), exc.param, exc.code)
    status = responses_api.STATUS.get(job.status, "in_progress")
    usage = {"prompt_tokens": job.prompt_tokens or 0, "completion_tokens": job.completion_tokens or 0}
    model = routing.routed_model(job) or await sync_to_async(lambda: job.deployment.model.name)()
    return JsonResponse(responses_api.response(job.pk, job.created.timestamp(), model, status, {}, job.output,
                                               job.tool_calls, usage, job.error or None))
