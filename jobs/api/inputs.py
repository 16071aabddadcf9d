"""What a script sends to make a job — messages or a prompt, and where to run it — checked once for both APIs.

Generation parameters are not here: jobs/params.py is their one validation.
Every refusal is an InputError naming the field at fault, never a crash.
"""

import json
from dataclasses import dataclass

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest
from django.http.request import RawPostDataException

from jobs.params import NOT_TEXT, unicode_text
from jobs.queue import queueing, routing, wakeup
from models_app.models import Deployment

ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
MAX_CALL_ID = 200


class InputError(ValueError):
    def __init__(self, message: str, param: str | None = None, code: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.param, self.code, self.status = param, code, status


def json_body(request: HttpRequest) -> dict:
    """The request's JSON object (NaN and Infinity are left for the field checks to name)."""
    try:
        body = json.loads(request.body or b"null")
    except RequestDataTooBig:
        raise InputError("The request body is too large.", status=413) from None
    except RecursionError:
        raise InputError("The request body nests deeper than the panel reads (about 1,000 levels).") from None
    except (ValueError, RawPostDataException):
        raise InputError("The request body is not valid JSON.") from None
    if not isinstance(body, dict):
        raise InputError("The request body must be a JSON object.")
    return body


def messages(value, param: str = "messages") -> list[dict]:
    if not isinstance(value, list) or not value:
        raise InputError(f"{param} must be a non-empty list of {{role, content}} objects.", param)
    return [message(item, f"{param}[{i}]") for i, item in enumerate(value)]


def message(item, param: str) -> dict:
    if not isinstance(item, dict):
        raise InputError(f"{param} must be an object with a role and a content.", param)
    role = item.get("role")
    if not isinstance(role, str) or role not in ROLES and role != "tool":
        raise InputError(f"{param}.role must be one of system, user, assistant or tool, not {json.dumps(role)}.",
                         f"{param}.role")
    if role == "tool":  # a function's result, answering the call of that id
        call = item.get("tool_call_id")
        if not isinstance(call, str) or not call or len(call) > MAX_CALL_ID:
            raise InputError(f"{param}.tool_call_id must be the id of the tool call this message answers.",
                             f"{param}.tool_call_id")
        return {"role": "tool", "tool_call_id": call, "content": content(item.get("content"), f"{param}.content")}
    if role == "assistant" and item.get("tool_calls"):  # its content may then be null
        text = item.get("content")
        return {"role": "assistant", "content": "" if text is None else content(text, f"{param}.content"),
                "tool_calls": tool_calls(item["tool_calls"], f"{param}.tool_calls")}
    return {"role": ROLES[role], "content": content(item.get("content"), f"{param}.content")}


def tool_calls(value, param: str) -> list[dict]:
    """An assistant message's calls, in OpenAI's shape: [{id, type: "function", function: {name, arguments}}]."""
    if not isinstance(value, list):
        raise InputError(f"{param} must be a list of tool calls.", param)
    calls = []
    for i, call in enumerate(value):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str) \
                or not isinstance(function.get("arguments", ""), str) or not isinstance(call.get("id", ""), str):
            raise InputError(f'{param}[{i}] must be {{"id": ..., "type": "function", "function": {{"name": ..., '
                             f'"arguments": "<JSON text>"}}}}.', f"{param}[{i}]")
        calls.append({"id": call.get("id", ""), "type": "function",
                      "function": {"name": text(function["name"], f"{param}[{i}].function.name"),
                                   "arguments": text(function.get("arguments", ""),
                                                     f"{param}[{i}].function.arguments")}})
    return calls


def content(value, param: str) -> str:
    if isinstance(value, str):
        return text(value, param)
    if isinstance(value, list) and all(
            isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
            for part in value):
        return text("".join(part["text"] for part in value), param)
    raise InputError(f"{param} must be a string or a list of text parts (images and audio are not supported).",
                     param)


def prompt(value, param: str = "prompt") -> str:
    if isinstance(value, list) and len(value) == 1:
        value = value[0]  # OpenAI clients may send one prompt as a one-item list
    if not isinstance(value, str):
        raise InputError(f"{param} must be a string.", param)
    return text(value, param)


def text(value: str, param: str) -> str:
    """`value`, if it is text that can be stored and read (jobs/params.py `unicode_text`)."""
    if not unicode_text(value):
        raise InputError(f"{param} contains {NOT_TEXT}.", param)
    return value


@dataclass(frozen=True)
class Target:
    deployment: Deployment
    model: str | None  # the model it was routed by (jobs/queue/routing.py); None: the caller named the deployment


def deployment_for(model, tokens: int | None = None) -> Deployment:
    return target_for(model, tokens).deployment


def target_for(model, tokens: int | None = None) -> Target:
    """Where a request for a model id goes (a model's name or `deployment-<id>`; none given: the default's model).
    A model's name goes to its replica that will answer soonest (`routing.pick`); `deployment-<id>` to that one.
    An on-call model that nothing serves is woken, and the job waits on the deployment loading it (a 503 with the
    numbers when it fits nowhere: jobs/queue/wakeup.py)."""
    if model is not None and not isinstance(model, str):
        raise InputError("model must be a string.", "model")
    woken = wake(model, tokens) if model else None
    if woken is not None:
        return Target(woken, model)
    usable = list(queueing.usable_deployments(offline_too=True))
    if model and not any(model in (d.model.name, f"deployment-{d.pk}") for d in usable):
        woken = wake(model, tokens)  # it served a moment ago, and was unloaded since: woken again
        if woken is not None:
            return Target(woken, model)
    if not usable:
        raise InputError("No deployment is ready: ask a lab admin to deploy a model.", "model",
                         "model_not_available", status=503)
    pinned = next((deployment for deployment in usable if model == f"deployment-{deployment.pk}"), None)
    if pinned is not None:
        return Target(pinned, None)
    name = model or next((d for d in usable if not d.offline_laptops()), usable[0]).model.name
    named = [deployment for deployment in usable if deployment.model.name == name]
    if named:  # none online: one that is offline for now, which queueing refuses in words
        return Target(routing.pick(name, tokens) or named[0], name)
    ready = ", ".join(sorted({name for d in usable for name in d.model_ids}))
    raise InputError(f"The model {model!r} does not exist or is not deployed and ready. Ready: {ready}.",
                     "model", "model_not_found", status=404)


def wake(model: str, tokens: int | None) -> Deployment | None:
    if not model.isprintable():  # no model has such a name, and a NUL is PostgreSQL's 500
        return None
    try:
        return wakeup.wake(model, tokens)
    except wakeup.NoRoom as exc:
        raise InputError(str(exc), "model", "model_cannot_load", status=503) from None
    except wakeup.TooLong as exc:  # refused before anything is loaded for it
        raise InputError(str(exc), "max_tokens", "context_length_exceeded") from None
