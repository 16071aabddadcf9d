"""The chat page: a signed-in user's conversations with a ready deployment."""

import json
from collections import Counter

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from clusterpanel.kit import confirm
from jobs.chat import conversations, edits
from jobs.models import Conversation, Job
from jobs.params import LIMITS, ParamError, validate
from jobs.queue import admission, ending, queueing
from models_app.models import OnCall
from models_app.oncall import service as oncall


def own_conversation(request: HttpRequest, pk: int) -> Conversation:
    return get_object_or_404(Conversation, pk=pk, user=request.user)


def chat_home(request: HttpRequest) -> HttpResponse:
    latest = request.user.conversations.first()
    if latest is None:
        latest = Conversation.objects.create(user=request.user, deployment=conversations.default_deployment())
    return redirect("chat:conversation", pk=latest.pk)


@require_POST
def new_conversation(request: HttpRequest) -> HttpResponse:
    current = request.user.conversations.first()
    conversation = Conversation.objects.create(
        user=request.user, deployment=conversations.default_deployment(),
        system_prompt=current.system_prompt if current else "", params=current.params if current else {})
    return redirect("chat:conversation", pk=conversation.pk)


def conversation_page(request: HttpRequest, pk: int) -> HttpResponse:
    conversation = own_conversation(request, pk)
    deployments = list(queueing.usable_deployments())
    models = Counter(deployment.model.name for deployment in deployments)  # each model's ready replicas
    last = conversation.deployment if conversation.deployment in deployments else (deployments or [None])[0]
    on_call = on_call_not_ready(set(models))
    if conversation.deployment and conversation.deployment.model.name in dict(on_call):  # still loading for it
        last = conversation.deployment
    return render(request, "jobs/chat.html", {
        "conversation": conversation, "conversations": request.user.conversations.all()[:50],
        "turns": conversations.turns(conversation), "deployments": deployments, "models": sorted(models.items()),
        "on_call": on_call, "chosen": f"{conversations.MODEL}{last.model.name}" if last else "",
        "params": {**conversations.Params().as_dict(), **conversation.params}, "limits": LIMITS,
    })


def on_call_not_ready(ready: set[str]) -> list[tuple[str, str]]:
    """On-call models nothing serves yet, with their state (asleep, loading): a message to one wakes it."""
    models = [on_call.model for on_call in OnCall.objects.select_related("model").order_by("model__name")
              if on_call.model.name not in ready]
    states = oncall.states(models)
    return [(model.name, states[model.pk]) for model in models]


@require_POST
def send(request: HttpRequest, pk: int) -> JsonResponse:
    """JSON in ({text, system_prompt, deployment, params}), JSON out: the job to listen to, or why not."""
    conversation = own_conversation(request, pk)
    try:
        body = json.loads(request.body or b"{}")
        if not isinstance(body, dict):
            raise ValueError
    except (ValueError, RecursionError):
        return refused("The request was not the JSON the page sends; reload the page.")
    try:
        params = validate(body.get("params") if isinstance(body.get("params"), dict) else {})
        deployment, routed_by = conversations.chosen(body.get("deployment"), conversation, params.max_tokens)
        conversations.set_system_prompt(conversation, body.get("system_prompt"))
        job = conversations.ask(conversation, conversations.typed_text(body.get("text"), "message"), params,
                                deployment, routed_by)
    except ParamError as exc:
        return refused(str(exc), exc.param)
    except conversations.ChatError as exc:
        return refused(str(exc))
    except admission.OverLimit as exc:
        answer = JsonResponse({"error": str(exc), "field": None, "retry_after": exc.retry_after}, status=429)
        answer["Retry-After"] = str(exc.retry_after)
        return answer
    return JsonResponse({"job": job.pk, "position": queueing.position(job), "title": conversation.title})


def refused(message: str, field: str | None = None) -> JsonResponse:
    return JsonResponse({"error": message, "field": field}, status=400)


def own_job(request: HttpRequest, pk: int) -> Job:
    job = get_object_or_404(Job, pk=pk)
    if job.user_id != request.user.pk and not request.user.is_lab_admin:
        raise Http404
    return job


def answer(request: HttpRequest, pk: int) -> JsonResponse:
    """A finished answer as safe HTML, with its timings (the page swaps the streamed text for it)."""
    job = own_job(request, pk)
    ctx = job.deployment.ctx if job.deployment else None  # None: its deployment was removed since
    return JsonResponse({"html": conversations.render(job.output), "ctx": ctx, **job.summary()})


@require_POST
def stop(request: HttpRequest, pk: int) -> JsonResponse:
    job = ending.cancel(own_job(request, pk))
    return JsonResponse({"status": job.status})


@require_POST
def rename(request: HttpRequest, pk: int) -> HttpResponse:
    conversation = own_conversation(request, pk)
    try:
        edits.rename(conversation, request.POST.get("title", ""))
    except edits.ManageError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Renamed to “{conversation.title}”.")
    return redirect("chat:conversation", pk=pk)


@require_http_methods(["GET", "POST"])
def delete(request: HttpRequest, pk: int) -> HttpResponse:
    conversation = own_conversation(request, pk)
    return confirm.ask_then_do(
        request, question=f"Delete “{conversation}”?", back=reverse("chat:conversation", args=[pk]), verb="Delete",
        check=lambda: edits.deletion(conversation), act=lambda: edits.delete(conversation),
        refusals=(edits.ManageError,), done=f"“{conversation}” deleted.", then=reverse("chat:home"))
