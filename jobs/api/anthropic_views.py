"""/v1/messages and /v1/messages/count_tokens: Anthropic's Messages API, for the `anthropic` SDK and Claude Code
(`ANTHROPIC_BASE_URL` at the panel, a panel token as the API key: `x-api-key` or a bearer token). Each request
is made an OpenAI chat request (jobs/api/anthropic_api.py) and answered by the same Answer as /v1/chat/completions,
its answer made Anthropic's; every error is in Anthropic's shape."""

import json
import logging

from asgiref.sync import sync_to_async
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from clusterpanel.accounts import apiauth
from jobs.api import anthropic_api, inputs, openai_api, translated
from jobs.api.inputs import InputError
from jobs.api.openai_submit import REDIS_LOST, submit
from jobs.api.openai_views import Answer, caller
from jobs.engine import generic_tools
from jobs.models import JobKind
from jobs.queue import admission, queueing
from jobs.queue.listen import REDIS_DOWN, StreamLost
from models_app.llamacpp import vocab
from models_app.llamacpp.chat import ChatError
from models_app.models import Deployment, GgufModel

log = logging.getLogger(__name__)


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
    """The prompt's tokens as the engine would make them: the model's vocabulary and template, read in this process
    (models_app/llamacpp/vocab.py), not its weights. Claude Code asks it to size its context."""
    try:
        await sync_to_async(caller)(request)
        body = inputs.json_body(request)
        wanted = openai_api.parse(anthropic_api.openai_body({**body, "max_tokens": 1}), JobKind.CHAT)
        counted = await sync_to_async(prompt_tokens)(wanted)
    except apiauth.Unauthorized as exc:
        return failed(exc.status if exc.status == 403 else 401, str(exc))
    except InputError as exc:
        return failed(exc.status, str(exc))
    return JsonResponse({"input_tokens": counted})


def prompt_tokens(wanted: openai_api.Request) -> int:
    path = model_path(wanted.model)
    if path is None:
        raise InputError(f"The model {wanted.model!r} is not one the panel has.", "model", status=404)
    params = openai_api.generation_params(wanted, None).as_dict()
    try:
        native = vocab.native_tools(path)
        tool_using = params.get("tools") or any(m["role"] == "tool" or m.get("tool_calls") for m in wanted.messages)
        request = generic_tools.chat_request(wanted.messages, params, native) if tool_using else \
            {"messages": wanted.messages}
        if request.get("generic"):
            request = {"messages": request["messages"]}  # the tools in words, in the system prompt
        return vocab.prompt_tokens(path, request)
    except (vocab.VocabError, ChatError) as exc:  # a template llama.cpp cannot render: the estimate instead
        log.warning("count_tokens for %s: %s; estimating", wanted.model, exc)
        return max(1, len(json.dumps([wanted.messages, params.get("tools")], ensure_ascii=False)) // 4)


def model_path(name) -> str | None:
    """The GGUF a request's model names, loaded or not (counting wakes no on-call model); none named: the one a
    request without a model would go to."""
    if isinstance(name, str) and name.startswith("deployment-") and name[len("deployment-"):].isdigit():
        deployment = Deployment.objects.filter(pk=int(name[len("deployment-"):])).select_related("model").first()
        return deployment.model.path if deployment else None
    if isinstance(name, str) and name:
        return GgufModel.objects.filter(name=name).values_list("path", flat=True).first()
    usable = queueing.usable_deployments().select_related("model").first()
    return usable.model.path if usable else None
