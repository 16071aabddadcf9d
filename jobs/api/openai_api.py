"""OpenAI's request and response shapes, translated to and from jobs. No HTTP, no database here.

Requests: fields the panel understands are checked strictly (type, then range
through jobs/params.py); fields it does not know are ignored, since OpenAI
clients send many. Responses: `chat.completion(.chunk)` and `text_completion`.
"""

import json
import math
import re
from dataclasses import dataclass, field

from jobs import params
from jobs.api import inputs
from jobs.api.inputs import InputError
from jobs.models import STOPPED, JobKind

EXCEEDED = re.compile(r"the prompt has (\d+) tokens and the deployment's context is (\d+)")
FLOATS = ("temperature", "top_p", "repeat_penalty", "frequency_penalty", "presence_penalty")
INTEGERS = ("top_k", "max_tokens", "max_completion_tokens", "seed", "n", "top_logprobs")
PASSED_ON = ("temperature", "top_p", "top_k", "seed", "stop", "repeat_penalty", "response_format", "tools",
             "tool_choice", "parallel_tool_calls")


@dataclass
class Request:
    kind: str
    model: str | None
    stream: bool = False
    include_usage: bool = False
    messages: list[dict] = field(default_factory=list)
    prompt: str = ""
    generation: dict = field(default_factory=dict)  # names as jobs/params.py knows them
    renamed: dict = field(default_factory=dict)  # params.py's name -> the name the client used
    inputs: list = field(default_factory=list)  # an embedding's texts or token lists (jobs/api/embeddings.py)
    embedding: dict = field(default_factory=dict)  # and its encoding_format and dimensions
    ceiling: bool = False  # max_tokens is a ceiling (Anthropic's, always sent), cut to the deployment's context


def parse(body: dict, kind: str) -> Request:
    """A Request from an OpenAI body, or InputError naming the field."""
    for name in FLOATS + INTEGERS:
        typed(body, name)
    request = Request(kind=kind, model=body.get("model"), stream=flag(body, "stream"),
                      include_usage=usage_wanted(body))
    if kind == JobKind.CHAT:
        request.messages = inputs.messages(body.get("messages"))
    else:
        request.prompt = inputs.prompt(body.get("prompt"))
    if body.get("n") not in (None, 1):
        raise InputError("n must be 1: the panel makes one choice per request.", "n")
    for name in ("frequency_penalty", "presence_penalty"):
        if body.get(name):
            raise InputError(f"{name} is not supported; use repeat_penalty (llama.cpp's, 1.0 is off).", name)
    request.generation = {name: body[name] for name in PASSED_ON if body.get(name) is not None}
    for name in ("max_completion_tokens", "max_tokens"):
        if body.get(name) is not None:
            request.generation["max_tokens"], request.renamed["max_tokens"] = body[name], name
            break
    logprobs(body, request)
    generation_params(request, None)  # bad input is refused before a deployment is looked for (none may be ready)
    return request


def logprobs(body: dict, request: Request) -> None:
    """Chat: `logprobs` true, `top_logprobs` 0-20 others; completions: `logprobs` the number of others (0-5 at
    OpenAI, 20 here). Either way the job's `logprobs` param is how many others."""
    if request.kind == JobKind.CHAT:
        wanted, top = flag(body, "logprobs"), body.get("top_logprobs")
        if top is not None and not wanted:
            raise InputError("top_logprobs needs logprobs set to true.", "top_logprobs")
        if wanted:
            request.generation["logprobs"] = 0 if top is None else top
            request.renamed["logprobs"] = "top_logprobs"
    elif body.get("logprobs") is not None:
        request.generation["logprobs"] = body["logprobs"]


def typed(body: dict, name: str) -> None:
    value = body.get(name)
    if value is None:
        return
    whole = name in INTEGERS
    if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)):
        raise InputError(f"{name} must be {'a whole number' if whole else 'a number'}, not {json.dumps(value)}.",
                         name)
    if isinstance(value, float) and not math.isfinite(value):  # an int is finite; isfinite(10**400) overflows
        raise InputError(f"{name} must be a finite number.", name)


def flag(body: dict, name: str) -> bool:
    value = body.get(name)
    if value is not None and not isinstance(value, bool):
        raise InputError(f"{name} must be true or false.", name)
    return bool(value)


def usage_wanted(body: dict) -> bool:
    options = body.get("stream_options")
    if options is None:
        return False
    if not isinstance(options, dict):
        raise InputError("stream_options must be an object.", "stream_options")
    return flag(options, "include_usage")


def generation_params(request: Request, ctx: int | None) -> params.Params:
    """Checked by jobs/params.py; max_tokens may not exceed the deployment's context, once there is one."""
    try:
        return params.validate(request.generation, max_tokens_limit=ctx)
    except params.ParamError as exc:
        name = request.renamed.get(exc.param, exc.param)
        raise InputError(str(exc).replace(exc.param or "\0", name or "", 1), name) from None


def error(message: str, param: str | None = None, code: str | None = None,
          kind: str = "invalid_request_error") -> dict:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def kind_of(status: int) -> str:
    """OpenAI's error type for a status: a request the caller can fix, or a server that could not serve it (a 503
    while Redis is away is not the request's fault)."""
    return "server_error" if status >= 500 else "invalid_request_error"


def failure(done: dict, request: Request) -> tuple[int, dict]:
    """The status and error body for a job that failed."""
    found = EXCEEDED.search(done.get("error") or "")
    if found:
        tokens, ctx = found.groups()
        param = {JobKind.CHAT: "messages", JobKind.EMBEDDING: "input"}.get(request.kind, "prompt")
        return 400, error(f"This model's maximum context length is {ctx} tokens, but your {param} resulted in "
                          f"{tokens} tokens. {done['error']}", param, "context_length_exceeded")
    if (done.get("error") or "").startswith(STOPPED):  # a laptop stopped answering: no fault of the request's
        return 503, error(done["error"], None, "service_unavailable", "server_error")
    return 500, error(done.get("error") or "The job failed.", None, "job_failed", "server_error")


def usage(done: dict) -> dict:
    timings = done.get("timings") or {}
    prompt, completion = timings.get("prompt_tokens") or 0, timings.get("completion_tokens") or 0
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": timings.get("cached_tokens") or 0}}


def finish_reason(done: dict) -> str:
    return done.get("finish_reason") or ("cancelled" if done.get("status") == "cancelled" else "stop")


class Shapes:
    """Response bodies for one job, as OpenAI names and nests them."""

    def __init__(self, job_id: int, created: int, model: str, kind: str) -> None:
        self.chat = kind == JobKind.CHAT
        self.base = {"id": f"{'chatcmpl' if self.chat else 'cmpl'}-{job_id}", "created": created, "model": model}

    def whole(self, done: dict) -> dict:
        text, reason, calls = done.get("output") or "", finish_reason(done), done.get("tool_calls") or []
        message = {"role": "assistant", "content": text or None, "tool_calls": calls} if calls else \
            {"role": "assistant", "content": text}
        found = self.logprobs(done.get("logprobs"))
        choice = ({"index": 0, "message": message, "logprobs": found, "finish_reason": reason} if self.chat else
                  {"index": 0, "text": text, "logprobs": found, "finish_reason": reason})
        return {**self.base, "object": "chat.completion" if self.chat else "text_completion",
                "choices": [choice], "usage": usage(done)}

    def logprobs(self, entries: list[dict] | None) -> dict | None:
        """OpenAI's logprobs object for these tokens' entries: chat's `content` list, or completions' columns."""
        if entries is None:
            return None
        if self.chat:
            return {"content": entries, "refusal": None}
        return {"tokens": [e["token"] for e in entries], "token_logprobs": [e["logprob"] for e in entries],
                "top_logprobs": [{t["token"]: t["logprob"] for t in e["top_logprobs"]} for e in entries],
                "text_offset": offsets(entries)}

    def chunk(self, text: str | None = None, reason: str | None = None, role: bool = False,
              entries: list[dict] | None = None) -> dict:
        found = self.logprobs(entries) if entries else None
        if self.chat:
            delta = {"role": "assistant", "content": ""} if role else {} if text is None else {"content": text}
            choice = {"index": 0, "delta": delta, "logprobs": found, "finish_reason": reason}
        else:
            choice = {"index": 0, "text": text or "", "logprobs": found, "finish_reason": reason}
        return {**self.base, "object": "chat.completion.chunk" if self.chat else "text_completion",
                "choices": [choice]}

    def call_chunk(self, delta: dict) -> dict:
        """A tool call's delta: its id, type and name first, then pieces of its arguments (OpenAI's shape)."""
        call = {"index": delta["index"]}
        if "id" in delta:
            call.update(id=delta["id"], type="function")
        function = {key: delta[key] for key in ("name", "arguments") if key in delta}
        if "name" in function and "arguments" not in function:
            function["arguments"] = ""
        call["function"] = function
        choice = {"index": 0, "delta": {"tool_calls": [call]}, "logprobs": None, "finish_reason": None}
        return {**self.base, "object": "chat.completion.chunk", "choices": [choice]}

    def usage_chunk(self, done: dict) -> dict:
        return {**self.base, "object": "chat.completion.chunk" if self.chat else "text_completion",
                "choices": [], "usage": usage(done)}


def offsets(entries: list[dict]) -> list[int]:
    """Where each token's text starts in the answer, in characters (completions' text_offset)."""
    at, found = 0, []
    for entry in entries:
        found.append(at)
        at += len(bytes(entry["bytes"]).decode("utf-8", errors="ignore"))
    return found
