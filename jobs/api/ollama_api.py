"""Ollama's API in OpenAI's terms, both ways, for the many apps that only speak Ollama: /api/chat and
/api/generate bodies become the OpenAI requests the panel already serves, and their answers, whole or streamed,
become Ollama's (NDJSON lines, `done` and its counts). No HTTP, no database here. Served under /ollama/ (Ollama's
paths, /ollama/api/chat, so a client given http://panel/ollama as its host finds them) beside the panel's own /api/.
"""

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from jobs.api import translated
from jobs.api.inputs import InputError

VERSION = "0.6.3"  # the Ollama API this follows; clients check it before using newer fields
OPTIONS = {"temperature": "temperature", "top_p": "top_p", "top_k": "top_k", "seed": "seed", "stop": "stop",
           "repeat_penalty": "repeat_penalty", "num_predict": "max_tokens"}
DONE_REASONS = {"stop": "stop", "length": "length", "tool_calls": "stop", "cancelled": "stop"}


def now(later: timedelta = timedelta(0)) -> str:
    return (datetime.now(UTC) + later).isoformat().replace("+00:00", "Z")


def options(body: dict) -> dict:
    given = body.get("options") or {}
    if not isinstance(given, dict):
        raise InputError("options must be an object (temperature, top_p, top_k, seed, stop, num_predict, ...).",
                         "options")
    wanted = {ours: given[theirs] for theirs, ours in OPTIONS.items() if given.get(theirs) is not None}
    if wanted.get("max_tokens") == -1:  # Ollama's "until the context ends": the panel's default instead
        del wanted["max_tokens"]
    fmt = body.get("format")
    if fmt == "json":
        wanted["response_format"] = {"type": "json_object"}
    elif isinstance(fmt, dict):
        wanted["response_format"] = {"type": "json_schema", "json_schema": {"name": "format", "schema": fmt}}
    elif fmt not in (None, ""):
        raise InputError('format must be "json" or a JSON schema object.', "format")
    return wanted


def chat_body(body: dict) -> dict:
    """The OpenAI chat body for an Ollama /api/chat body (streamed unless `stream` is false, as Ollama does)."""
    given = body.get("messages")
    if not isinstance(given, list) or not given:
        raise InputError("messages must be a non-empty list of {role, content} objects.", "messages")
    messages = [message(item, f"messages[{i}]") for i, item in enumerate(given)]
    wanted = {"model": body.get("model"), "messages": messages, "stream": body.get("stream", True) is not False,
              "stream_options": {"include_usage": True}, **options(body)}
    if body.get("tools"):
        wanted["tools"] = body["tools"]
    return wanted


def message(item, param: str) -> dict:
    if not isinstance(item, dict):
        raise InputError(f"{param} must be an object with a role and a content.", param)
    if item.get("images"):
        raise InputError(f"{param}.images: the panel serves text models; images are not taken.", f"{param}.images")
    found = {"role": item.get("role"), "content": item.get("content", "")}
    if item.get("tool_calls"):
        found["tool_calls"] = [{"id": f"call_{i}", "type": "function", "function": {
            "name": (call.get("function") or {}).get("name"),
            "arguments": json.dumps((call.get("function") or {}).get("arguments", {}), ensure_ascii=False)}}
            for i, call in enumerate(item["tool_calls"]) if isinstance(call, dict)]
    if item.get("role") == "tool":  # Ollama names the tool, not the call
        found["tool_call_id"] = item.get("tool_call_id") or item.get("tool_name") or "call_0"
    return found


def generate_body(body: dict) -> dict:
    """/api/generate: the prompt in the model's chat template (a system prompt before it), or as it is with
    `raw` (a completion)."""
    prompt = body.get("prompt")
    if not isinstance(prompt, str):
        raise InputError("prompt must be a string.", "prompt")
    wanted = {"model": body.get("model"), "stream": body.get("stream", True) is not False,
              "stream_options": {"include_usage": True}, **options(body)}
    if body.get("raw"):
        return {**wanted, "prompt": prompt}
    system = body.get("system")
    return {**wanted, "messages": ([{"role": "system", "content": system}] if system else []) +
            [{"role": "user", "content": prompt}]}


def counts(usage: dict | None, started: float) -> dict:
    usage = usage or {}
    return {"total_duration": int((time.monotonic() - started) * 1e9), "load_duration": 0,
            "prompt_eval_count": usage.get("prompt_tokens", 0), "prompt_eval_duration": 0,
            "eval_count": usage.get("completion_tokens", 0), "eval_duration": 0}


def calls(openai_calls: list[dict]) -> list[dict]:
    return [{"function": {"name": call["function"]["name"], "arguments": arguments(call["function"]["arguments"])}}
            for call in openai_calls]


def arguments(text: str) -> dict:
    try:
        found = json.loads(text or "{}")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def whole(answer: dict, model: str, generate: bool, started: float) -> dict:
    """Ollama's answer (/api/generate's or /api/chat's) for an OpenAI chat.completion or text_completion."""
    choice = answer["choices"][0]
    base = {"model": model, "created_at": now(), "done": True,
            "done_reason": DONE_REASONS.get(choice["finish_reason"], "stop"), **counts(answer.get("usage"), started)}
    if generate:
        return {**base, "response": choice.get("text") or choice.get("message", {}).get("content") or ""}
    message = {"role": "assistant", "content": choice["message"].get("content") or ""}
    if choice["message"].get("tool_calls"):
        message["tool_calls"] = calls(choice["message"]["tool_calls"])
    return {**base, "message": message}


class Stream(translated.Translator):
    """OpenAI's chunks made Ollama's NDJSON lines: one a piece of text, the calls (whole, as Ollama sends them)
    in the last message line, then the `done` line with the reason and counts; an error chunk an {"error"} line."""

    comments = False  # NDJSON has none: a queued job's place is not said

    def __init__(self, model: str, chat: bool, generate: bool) -> None:
        self.model, self.chat, self.generate, self.started = model, chat, generate, time.monotonic()
        self.calls: dict[int, dict] = {}
        self.reason, self.usage = "stop", None

    def line(self, body: dict) -> str:
        return json.dumps({"model": self.model, "created_at": now(), **body}, ensure_ascii=False) + "\n"

    def piece(self, text: str) -> dict:
        return {"response": text} if self.generate else {"message": {"role": "assistant", "content": text}}

    def chunk(self, data: str) -> Iterator[str]:
        if data == "[DONE]":
            if self.calls:
                found = [{"id": "", "function": call} for call in self.calls.values()]
                yield self.line({"message": {"role": "assistant", "content": "", "tool_calls": calls(found)},
                                 "done": False})
            yield self.line({**self.piece(""), "done": True, "done_reason": self.reason,
                             **counts(self.usage, self.started)})
            return
        found = json.loads(data)
        if "error" in found:
            yield json.dumps({"error": found["error"]["message"]}) + "\n"
            return
        if found.get("usage"):
            self.usage = found["usage"]
        for choice in found.get("choices") or []:
            text = (choice.get("delta") or {}).get("content") if self.chat else choice.get("text")
            if text:
                yield self.line({**self.piece(text), "done": False})
            for call in (choice.get("delta") or {}).get("tool_calls") or []:
                kept = self.calls.setdefault(call["index"], {"name": "", "arguments": ""})
                function = call.get("function") or {}
                kept["name"] += function.get("name") or ""
                kept["arguments"] += function.get("arguments") or ""
            if choice.get("finish_reason"):
                self.reason = DONE_REASONS.get(choice["finish_reason"], "stop")
