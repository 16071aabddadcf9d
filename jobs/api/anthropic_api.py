"""Anthropic's Messages API in OpenAI's terms, both ways: a /v1/messages body becomes the OpenAI chat body the
panel already serves (messages, tools, tool_choice, limits), and the OpenAI answer, whole or streamed, becomes
Anthropic's message, its content blocks and its stream events. No HTTP, no database here: one door behind both
APIs, so the same tokens, limits, queue, routing and cancelling hold for both.
"""

import json
from collections.abc import Iterator

from jobs import params
from jobs.api import translated
from jobs.api.inputs import InputError

STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "cancelled": "end_turn"}
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 503: "overloaded_error"}
SAMPLING = ("temperature", "top_p", "top_k")


def error(status: int, message: str) -> dict:
    return {"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": message}}


def openai_body(body: dict) -> dict:
    """The OpenAI chat body for an Anthropic Messages body; InputError naming the Anthropic field."""
    if not isinstance(body.get("max_tokens"), int) or isinstance(body.get("max_tokens"), bool):
        raise InputError("max_tokens is required: the most tokens the answer may have.", "max_tokens")
    messages = system(body.get("system"))
    turns = body.get("messages")
    if not isinstance(turns, list) or not turns:
        raise InputError("messages must be a non-empty list of {role, content} objects.", "messages")
    for i, turn in enumerate(turns):
        messages += message(turn, f"messages[{i}]")
    # Always sent, and often the model's whole output (Claude Code asks 32,000): a ceiling, cut to what the
    # deployment's context leaves (`Request.ceiling`).
    wanted = {"model": body.get("model"), "messages": messages,
              "max_tokens": min(body["max_tokens"], params.LIMITS["max_tokens"][2]),
              "stream": body.get("stream", False), "stream_options": {"include_usage": True}}
    wanted.update({name: body[name] for name in SAMPLING if body.get(name) is not None})
    stops = body.get("stop_sequences")
    if stops is not None:
        wanted["stop"] = stops
    if body.get("tools"):
        wanted.update(tools(body["tools"], body.get("tool_choice")))
    return wanted


def system(value) -> list[dict]:
    if value is None:
        return []
    return [{"role": "system", "content": text_of(value, "system")}]


def text_of(value, param: str) -> str:
    """A string, or text blocks joined (cache_control and citations are taken and set aside)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(b, dict) and b.get("type") == "text" for b in value):
        return "".join(str(block.get("text", "")) for block in value)
    raise InputError(f"{param} must be a string or a list of text blocks.", param)


def message(turn, param: str) -> list[dict]:
    """One Anthropic turn as OpenAI messages: a user turn's tool results become tool messages (in order, before
    its text), an assistant turn's tool_use blocks its tool_calls."""
    if not isinstance(turn, dict) or turn.get("role") not in ("user", "assistant"):
        raise InputError(f"{param}.role must be user or assistant.", f"{param}.role")
    content = turn.get("content")
    if isinstance(content, str):
        return [{"role": turn["role"], "content": content}]
    if not isinstance(content, list):
        raise InputError(f"{param}.content must be a string or a list of content blocks.", f"{param}.content")
    texts, calls, results = [], [], []
    for j, block in enumerate(content):
        where = f"{param}.content[{j}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind in ("thinking", "redacted_thinking"):
            continue  # the model's own earlier thoughts: not shown to it again, as Anthropic does
        elif kind == "tool_use" and turn["role"] == "assistant":
            calls.append({"id": str(block.get("id", "")), "type": "function",
                          "function": {"name": str(block.get("name", "")),
                                       "arguments": json.dumps(block.get("input", {}), ensure_ascii=False)}})
        elif kind == "tool_result" and turn["role"] == "user":
            result = block.get("content", "")
            text = result if isinstance(result, str) else text_of(result, f"{where}.content")
            results.append({"role": "tool", "tool_call_id": str(block.get("tool_use_id", "")),
                            "content": ("Error: " if block.get("is_error") else "") + text})
        else:
            raise InputError(f"{where} is a {json.dumps(kind)} block, which the panel does not take (text, "
                             f"tool_use and tool_result are; images and documents are not).", where)
    if turn["role"] == "assistant":
        return [{"role": "assistant", "content": "".join(texts) or (None if calls else ""),
                 **({"tool_calls": calls} if calls else {})}]
    return results + ([{"role": "user", "content": "".join(texts)}] if texts or not results else [])


def tools(given, choice) -> dict:
    if not isinstance(given, list):
        raise InputError("tools must be a list of {name, description, input_schema} objects.", "tools")
    functions = []
    for tool in given:
        if not isinstance(tool, dict):
            raise InputError("tools must be a list of {name, description, input_schema} objects.", "tools")
        functions.append({"type": "function", "function": {
            "name": tool.get("name"), "description": tool.get("description", ""),
            "parameters": tool.get("input_schema", {"type": "object", "properties": {}})}})
    wanted: dict = {"tools": functions}
    if choice is None:
        return wanted
    kind = choice.get("type") if isinstance(choice, dict) else None
    named = {"auto": "auto", "any": "required", "none": "none"}
    if kind == "tool":
        wanted["tool_choice"] = {"type": "function", "function": {"name": choice.get("name")}}
    elif kind in named:
        wanted["tool_choice"] = named[kind]
    else:
        raise InputError('tool_choice.type must be "auto", "any", "tool" or "none".', "tool_choice")
    if choice.get("disable_parallel_tool_use"):
        wanted["parallel_tool_calls"] = False
    return wanted


def usage(openai: dict | None) -> dict:
    openai = openai or {}
    return {"input_tokens": openai.get("prompt_tokens", 0), "output_tokens": openai.get("completion_tokens", 0),
            "cache_read_input_tokens": (openai.get("prompt_tokens_details") or {}).get("cached_tokens", 0),
            "cache_creation_input_tokens": 0}


def whole(answer: dict, model: str) -> dict:
    """Anthropic's message for an OpenAI chat.completion."""
    choice = answer["choices"][0]
    content = []
    if choice["message"].get("content"):
        content.append({"type": "text", "text": choice["message"]["content"]})
    for call in choice["message"].get("tool_calls") or []:
        content.append({"type": "tool_use", "id": call["id"], "name": call["function"]["name"],
                        "input": arguments(call["function"]["arguments"])})
    return {"id": "msg_" + answer["id"].removeprefix("chatcmpl-"), "type": "message", "role": "assistant",
            "model": model, "content": content, "stop_reason": STOP_REASONS.get(choice["finish_reason"], "end_turn"),
            "stop_sequence": None, "usage": usage(answer.get("usage"))}


def arguments(text: str) -> dict:
    try:
        found = json.loads(text or "{}")
    except ValueError:
        return {"_unparsed": text}
    return found if isinstance(found, dict) else {"value": found}


def event(kind: str, body: dict) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **body}, ensure_ascii=False)}\n\n"


class Stream(translated.Translator):
    """OpenAI's chunks, as the panel streams them, made Anthropic's events: message_start, a text block and a
    tool_use block per call (each with its start, deltas and stop), message_delta with the stop reason and
    usage, message_stop. An error chunk becomes an error event; SSE comments (a queued job's place) pass as
    they are."""

    def __init__(self, model: str) -> None:
        self.model, self.started, self.block, self.kind = model, False, -1, None
        self.calls: dict[int, int] = {}  # an OpenAI call's index → its block's
        self.reason, self.usage = "end_turn", {}

    def chunk(self, data: str) -> Iterator[str]:
        if data == "[DONE]":
            yield from self.close_block()
            yield event("message_delta", {"delta": {"stop_reason": self.reason, "stop_sequence": None},
                                          "usage": {"output_tokens": self.usage.get("output_tokens", 0)}})
            yield event("message_stop", {})
            return
        found = json.loads(data)
        if "error" in found:
            yield event("error", {"error": {"type": "api_error", "message": found["error"]["message"]}})
            return
        if not self.started:
            self.started = True
            message_id = "msg_" + found["id"].removeprefix("chatcmpl-")
            yield event("message_start", {"message": {
                "id": message_id, "type": "message", "role": "assistant", "model": self.model, "content": [],
                "stop_reason": None, "stop_sequence": None, "usage": usage(None)}})
        if found.get("usage"):
            self.usage = usage(found["usage"])
        for choice in found.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                yield from self.text(delta["content"])
            for call in delta.get("tool_calls") or []:
                yield from self.call(call)
            if choice.get("finish_reason"):
                self.reason = STOP_REASONS.get(choice["finish_reason"], "end_turn")

    def text(self, text: str) -> Iterator[str]:
        if self.kind != "text":
            yield from self.open_block("text", {"type": "text", "text": ""})
        yield event("content_block_delta", {"index": self.block, "delta": {"type": "text_delta", "text": text}})

    def call(self, call: dict) -> Iterator[str]:
        function = call.get("function") or {}
        if call["index"] not in self.calls:
            yield from self.open_block("tool_use", {"type": "tool_use", "id": call.get("id", ""),
                                                    "name": function.get("name", ""), "input": {}})
            self.calls[call["index"]] = self.block
        if function.get("arguments"):
            yield event("content_block_delta", {"index": self.calls[call["index"]],
                                                "delta": {"type": "input_json_delta",
                                                          "partial_json": function["arguments"]}})

    def open_block(self, kind: str, block: dict) -> Iterator[str]:
        yield from self.close_block()
        self.block, self.kind = self.block + 1, kind
        yield event("content_block_start", {"index": self.block, "content_block": block})

    def close_block(self) -> Iterator[str]:
        if self.kind is not None:
            yield event("content_block_stop", {"index": self.block})
            self.kind = None
