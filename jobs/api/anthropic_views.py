"""/v1/messages and /v1/messages/count_tokens: Anthropic's Messages API, for the `anthropic` SDK and Claude Code
(`ANTHROPIC_BASE_URL` at the panel, a panel token as the API key: `x-api-key` or a bearer token). Each request
is made an OpenAI chat request (jobs/api/anthropic_api.py) and answered by the same Answer as /v1/chat/completions,
its answer made Anthropic's; every error is in Anthropic's shape."""

import json

from asgiref.sync import sync_to_async
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from clusterpanel.accounts import apiauth
from jobs.api import anthropic_api, inputs, openai_api, translated
from jobs.api.inputs import InputError
from jobs.api.openai_submit import REDIS_LOST, submit
from jobs.api.openai_views import Answer, caller
from jobs.models import JobKind
from jobs.queue import admission
from jobs.queue.listen import REDIS_DOWN, StreamLost


def failed(status: int, message: str) -> JsonResponse:
    return JsonResponse(anthropic_api.error(status, message), status=status)


@login_not_required
@csrf_exempt
async def messages(request: HttpRequest) -> HttpResponse:
    try:
        user = await sync_to_async(caller)(request)
        if request.method != "POST":
            return failed(405, "Use POST.")
        body = anthropic_api.openai_body(inputs.json_body(request))
        wanted = openai_api.parse(body, JobKind.CHAT)
        wanted.ceiling = True
        job, model = await sync_to_async(submit)(user, request.api_token, wanted)
    except apiauth.Unauthorized as exc:
        return failed(exc.status if exc.status == 403 else 401, str(exc))
    except InputError as exc:
        return failed(exc.status, str(exc))
    except admission.OverLimit as exc:
        answer = failed(429, str(exc))
        answer["Retry-After"] = str(exc.retry_after)
        return answer
    try:
        answer = await Answer(job, wanted, model).respond()
    except (StreamLost, *REDIS_DOWN) as exc:
        return failed(503, f"{REDIS_LOST} ({exc}). Try again in a moment.")
    return anthropic_answer(answer, model)


def anthropic_answer(answer: HttpResponse, model: str) -> HttpResponse:
    if isinstance(answer, StreamingHttpResponse):
        return translated.streamed(answer, anthropic_api.Stream(model).lines)
    found = json.loads(answer.content)
    if answer.status_code != 200:
        return failed(answer.status_code, found["error"]["message"])
    return JsonResponse(anthropic_api.whole(found, model))


@login_not_required
@csrf_exempt
async def count_tokens(request: HttpRequest) -> HttpResponse:
    """An estimate, in Anthropic's shape: the prompt's characters over four (the panel tokenizes on the engine,
    which this must not wait for). Claude Code asks it to size its context."""
    try:
        await sync_to_async(caller)(request)
        body = inputs.json_body(request)
        anthropic_api.openai_body({**body, "max_tokens": 1})  # refused as /v1/messages would refuse it
    except apiauth.Unauthorized as exc:
        return failed(exc.status if exc.status == 403 else 401, str(exc))
    except InputError as exc:
        return failed(exc.status, str(exc))
    sent = json.dumps([body.get("system"), body.get("messages"), body.get("tools")], ensure_ascii=False)
    return JsonResponse({"input_tokens": max(1, len(sent) // 4)})
