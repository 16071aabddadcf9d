"""/ollama/api/...: Ollama's API (chat, generate, embed, tags, show, ps, version) for apps that only speak Ollama; give
them http://<panel>/ollama as the Ollama host and a panel token as a bearer header. Chat and generate are made
the OpenAI requests they mean and answered by /v1's own Answer (jobs/api/ollama_api.py translates); errors are
Ollama's {"error": ...}."""

import json
import time
from datetime import timedelta

from asgiref.sync import sync_to_async
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from clusterpanel.accounts import apiauth
from jobs.api import embeddings, inputs, ollama_api, openai_api, translated
from jobs.api.inputs import InputError
from jobs.api.openai_models import model_list
from jobs.api.openai_submit import REDIS_LOST, submit
from jobs.api.openai_views import Answer, caller
from jobs.models import JobKind
from jobs.queue import admission, queueing
from jobs.queue.listen import REDIS_DOWN, StreamLost
from models_app.models import GgufModel


def failed(status: int, message: str) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


def door(view):
    """Authentication and Ollama's errors around a view."""
    @login_not_required
    @csrf_exempt
    async def checked(request: HttpRequest) -> HttpResponse:
        try:
            request.api_user = await sync_to_async(caller)(request)
            return await view(request)
        except apiauth.Unauthorized as exc:
            return failed(exc.status if exc.status == 403 else 401, str(exc))
        except InputError as exc:
            return failed(exc.status, str(exc))
    return checked


@door
async def chat(request: HttpRequest) -> HttpResponse:
    return await generating(request, ollama_api.chat_body(inputs.json_body(request)), generate=False)


@door
async def generate(request: HttpRequest) -> HttpResponse:
    return await generating(request, ollama_api.generate_body(inputs.json_body(request)), generate=True)


async def generating(request: HttpRequest, body: dict, generate: bool) -> HttpResponse:
    if request.method != "POST":
        return failed(405, "Use POST.")
    chat_kind = "messages" in body
    answer, model = await answered(request, openai_api.parse(body, JobKind.CHAT if chat_kind else JobKind.COMPLETION))
    if model is None:
        return answer
    stream = ollama_api.Stream(model, chat_kind, generate)
    if isinstance(answer, StreamingHttpResponse):
        return translated.streamed(answer, stream.lines, "application/x-ndjson")
    found = json.loads(answer.content)
    if answer.status_code != 200:
        return failed(answer.status_code, found["error"]["message"])
    return JsonResponse(ollama_api.whole(found, model, generate, stream.started))


async def answered(request: HttpRequest, wanted: openai_api.Request) -> tuple[HttpResponse, str | None]:
    """/v1's answer to the request, and the model that gives it; (Ollama's error, None) when it was not queued."""
    try:
        job, model = await sync_to_async(submit)(request.api_user, request.api_token, wanted)
    except admission.OverLimit as exc:
        return failed(429, str(exc)), None
    try:
        return await Answer(job, wanted, model).respond(), model
    except (StreamLost, *REDIS_DOWN) as exc:
        return failed(503, f"{REDIS_LOST} ({exc}). Try again in a moment."), None


@door
async def embed(request: HttpRequest) -> HttpResponse:
    """/api/embed: `input` a text or a list of texts, every vector in `embeddings`."""
    return await embedding(request, inputs.json_body(request), "input")


@door
async def embeddings_legacy(request: HttpRequest) -> HttpResponse:
    """/api/embeddings, Ollama's older door: one `prompt`, one `embedding`."""
    return await embedding(request, inputs.json_body(request), "prompt")


async def embedding(request: HttpRequest, body: dict, field: str) -> HttpResponse:
    if request.method != "POST":
        return failed(405, "Use POST.")
    started = time.monotonic_ns()
    wanted = embeddings.parse({"model": body.get("model"), "input": body.get(field),
                               "dimensions": body.get("dimensions")})
    answer, model = await answered(request, wanted)
    if model is None:
        return answer
    found = json.loads(answer.content)
    if answer.status_code != 200:
        return failed(answer.status_code, found["error"]["message"].replace("input", field, 1))
    vectors = [item["embedding"] for item in found["data"]]
    if field == "prompt":
        return JsonResponse({"embedding": vectors[0]})
    return JsonResponse({"model": model, "embeddings": vectors, "total_duration": time.monotonic_ns() - started,
                         "load_duration": 0, "prompt_eval_count": found["usage"]["prompt_tokens"]})


def described(model: GgufModel | None, name: str) -> dict:
    details = {"parent_model": "", "format": "gguf", "family": model.architecture if model else "",
               "families": [model.architecture] if model else [], "parameter_size": "",
               "quantization_level": model.file_type if model else ""}
    return {"name": name, "model": name, "modified_at": (model.created.isoformat() if model else ollama_api.now()),
            "size": model.size if model else 0, "digest": model.sha256 if model else "", "details": details}


def models_by_name() -> dict[str, GgufModel]:
    return {model.name: model for model in GgufModel.objects.all()}


@door
async def tags(request: HttpRequest) -> HttpResponse:
    """Every model a request may name (as GET /v1/models lists them)."""
    def listed() -> list[dict]:
        known = models_by_name()
        return [described(known.get(item["id"]), item["id"]) for item in model_list()]
    return JsonResponse({"models": await sync_to_async(listed)()})


@door
async def ps(request: HttpRequest) -> HttpResponse:
    """The models loaded now: each ready deployment's."""
    def loaded() -> list[dict]:
        # A deployment stays loaded until it is stopped (or, on call, idle): a day on, as Ollama's clients read it.
        return [{**described(d.model, d.model.name), "expires_at": ollama_api.now(timedelta(days=1)), "size_vram": 0,
                 "context_length": d.ctx}
                for d in queueing.usable_deployments()]
    return JsonResponse({"models": await sync_to_async(loaded)()})


@door
async def show(request: HttpRequest) -> HttpResponse:
    body = inputs.json_body(request)
    name = body.get("model") or body.get("name")
    model = await sync_to_async(GgufModel.objects.filter(name=name).first)() if isinstance(name, str) else None
    if model is None:
        return failed(404, f"model '{name}' not found")
    item = described(model, model.name)
    return JsonResponse({"modelfile": "", "parameters": "", "template": "", "details": item["details"],
                         "model_info": {"general.architecture": model.architecture,
                                        f"{model.architecture}.context_length": model.context_length,
                                        f"{model.architecture}.block_count": model.n_layer,
                                        f"{model.architecture}.embedding_length": model.n_embd},
                         "capabilities": ["completion", "tools", "embedding"], "modified_at": item["modified_at"]})


@login_not_required
async def version(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"version": ollama_api.VERSION})


@login_not_required
async def running(request: HttpRequest) -> HttpResponse:
    """What Ollama answers at its root, which some apps ask to see that a server is there."""
    return HttpResponse("Ollama is running", content_type="text/plain")


@login_not_required
@csrf_exempt
def no_such_path(request: HttpRequest, rest: str = "") -> JsonResponse:
    return failed(404, f"{request.method} {request.path} is not served: the panel's Ollama API has api/chat, "
                       "api/generate, api/embed, api/embeddings, api/tags, api/show, api/ps and api/version "
                       "(docs/api.md).")
