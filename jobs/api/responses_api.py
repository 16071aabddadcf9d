"""OpenAI's Responses API in chat terms, both ways, for the `openai-agents` SDK and Codex CLI: a /v1/responses body
(input as text or items, instructions, function tools and their outputs, previous_response_id) becomes the chat
body the panel serves, and the chat answer, whole or streamed, becomes a `response` and its typed events. A
response is its job: `resp_<job id>`, and a later request's previous_response_id continues that job's
conversation. No HTTP, no database here.
"""

import json
import time
from collections.abc import Iterator

from jobs.api import translated
from jobs.api.inputs import InputError

STATUS = {"queued": "queued", "running": "in_progress", "succeeded": "completed", "failed": "failed",
          "cancelled": "cancelled"}
PREFIX = "resp_"


def job_id(response_id) -> int | None:
    if isinstance(response_id, str) and response_id.startswith(PREFIX) and response_id[len(PREFIX):].isdigit():
        return int(response_id[len(PREFIX):])
    return None


def history(messages: list[dict], output: str, tool_calls: list[dict]) -> list[dict]:
    """A finished response's conversation, to go on from: what it was asked (without its instructions, which a
    next response gives anew) and what it answered."""
    said = {"role": "assistant", "content": output or (None if tool_calls else "")}
    if tool_calls:
        said["tool_calls"] = tool_calls
    return [m for m in messages if m.get("role") != "system"] + [said]


def chat_body(body: dict, before: list[dict]) -> dict:
    """The chat body for a Responses body, after the conversation `before` (from previous_response_id)."""
    messages = ([{"role": "system", "content": body["instructions"]}] if body.get("instructions") else [])
    messages += before + items(body.get("input"))
    wanted = {"model": body.get("model"), "messages": messages, "stream": bool(body.get("stream")),
              "stream_options": {"include_usage": True}}
    for theirs, ours in (("temperature", "temperature"), ("top_p", "top_p"), ("max_output_tokens", "max_tokens"),
                         ("parallel_tool_calls", "parallel_tool_calls")):
        if body.get(theirs) is not None:
            wanted[ours] = body[theirs]
    offered = tools(body["tools"]) if body.get("tools") else []
    if offered:
        wanted["tools"] = offered
    if body.get("tool_choice") is not None and (offered or body["tool_choice"] not in ("auto", "none")):
        wanted["tool_choice"] = tool_choice(body["tool_choice"])  # with every tool set aside, "auto" means none
    fmt = (body.get("text") or {}).get("format") if isinstance(body.get("text"), dict) else None
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        wanted["response_format"] = {"type": "json_schema", "json_schema": {
            "name": fmt.get("name", "answer"), "schema": fmt.get("schema", {}), "strict": fmt.get("strict")}}
    elif isinstance(fmt, dict) and fmt.get("type") == "json_object":
        wanted["response_format"] = {"type": "json_object"}
    return wanted


def items(given) -> list[dict]:
    """Input items as chat messages: messages, function calls (one assistant turn for calls in a row) and their
    outputs; reasoning items set aside."""
    if isinstance(given, str):
        return [{"role": "user", "content": given}]
    if not isinstance(given, list) or not given:
        raise InputError("input must be text or a non-empty list of items.", "input")
    messages: list[dict] = []
    for i, item in enumerate(given):
        where = f"input[{i}]"
        kind = item.get("type", "message") if isinstance(item, dict) else None
        if kind == "message":
            messages.append({"role": item.get("role"), "content": text(item.get("content"), f"{where}.content")})
        elif kind == "function_call":
            call = {"id": str(item.get("call_id", "")), "type": "function",
                    "function": {"name": str(item.get("name", "")), "arguments": str(item.get("arguments", ""))}}
            if messages and messages[-1]["role"] == "assistant" and messages[-1].get("tool_calls"):
                messages[-1]["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output", "")
            messages.append({"role": "tool", "tool_call_id": str(item.get("call_id", "")),
                             "content": output if isinstance(output, str) else text(output, f"{where}.output")})
        elif kind == "reasoning":
            continue
        else:
            raise InputError(f"{where} is a {json.dumps(kind)} item, which the panel does not take (messages, "
                             f"function_call and function_call_output are).", where)
    return messages


def text(content, param: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") in ("input_text", "output_text", "text")
                                         for p in content):
        return "".join(str(part.get("text", "")) for part in content)
    raise InputError(f"{param} must be text or a list of text parts (images and files are not taken).", param)


HOSTED = {"web_search", "web_search_preview", "file_search", "code_interpreter", "computer_use_preview",
          "image_generation", "mcp", "local_shell", "custom"}


def tools(given) -> list[dict]:
    """Function tools as chat's, a namespace's functions among them. The tools OpenAI's servers run themselves
    (web search, file search, code interpreter, ...) and freeform `custom` tools are set aside, not refused:
    agents such as Codex CLI offer them with every request, and the model answers without them."""
    if not isinstance(given, list):
        raise InputError("tools must be a list of function tools.", "tools")
    functions = []
    for i, tool in enumerate(given):
        kind = tool.get("type") if isinstance(tool, dict) else None
        if kind == "namespace" and isinstance(tool.get("tools"), list):
            functions += [function(inner) for inner in tool["tools"]
                          if isinstance(inner, dict) and inner.get("type") == "function"]
        elif kind == "function":
            functions.append(function(tool))
        elif kind not in HOSTED:
            raise InputError(f"tools[{i}] is a {json.dumps(kind)} tool; the panel runs function tools (and sets "
                             "aside the kinds OpenAI's servers run, such as web_search).", f"tools[{i}]")
    return functions


def function(tool: dict) -> dict:
    return {"type": "function", "function": {
        "name": tool.get("name"), "description": tool.get("description") or "",
        "parameters": tool.get("parameters") or {"type": "object", "properties": {}}}}


def tool_choice(choice):
    if isinstance(choice, dict) and choice.get("type") == "function":
        return {"type": "function", "function": {"name": choice.get("name")}}
    return choice


def response(job_pk: int, created: float, model: str, status: str, body: dict, output: str = "",
             calls: list[dict] = (), usage: dict | None = None, error: str | None = None,
             previous: str | None = None) -> dict:
    """The `response` object: its output items (the message, then each function call) and usage."""
    items_out = []
    if output or (not calls and status == "completed"):
        items_out.append({"type": "message", "id": f"msg_{job_pk}", "status": "completed", "role": "assistant",
                          "content": [{"type": "output_text", "text": output, "annotations": [], "logprobs": []}]})
    for i, call in enumerate(calls):
        items_out.append({"type": "function_call", "id": f"fc_{job_pk}_{i}", "call_id": call["id"],
                          "name": call["function"]["name"], "arguments": call["function"]["arguments"],
                          "status": "completed"})
    usage = usage or {}
    return {"id": f"{PREFIX}{job_pk}", "object": "response", "created_at": created, "model": model,
            "status": status, "output": items_out, "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "tool_choice": body.get("tool_choice") or "auto", "tools": body.get("tools") or [],
            "instructions": body.get("instructions"), "previous_response_id": previous,
            "temperature": body.get("temperature"), "top_p": body.get("top_p"),
            "max_output_tokens": body.get("max_output_tokens"),
            "error": {"code": "server_error", "message": error} if error else None, "incomplete_details": None,
            "metadata": body.get("metadata") or {}, "text": body.get("text") or {"format": {"type": "text"}},
            "usage": {"input_tokens": usage.get("prompt_tokens", 0),
                      "input_tokens_details": {"cached_tokens": (usage.get("prompt_tokens_details") or {}).get(
                          "cached_tokens", 0), "cache_write_tokens": 0},
                      "output_tokens": usage.get("completion_tokens", 0),
                      "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)}}


def whole(answer: dict, job_pk: int, model: str, body: dict) -> dict:
    choice = answer["choices"][0]
    return response(job_pk, answer["created"], model, "completed", body, choice["message"].get("content") or "",
                    choice["message"].get("tool_calls") or [], answer.get("usage"),
                    previous=body.get("previous_response_id"))


class Stream(translated.Translator):
    """Chat chunks made the Responses API's typed events, each numbered: response.created and .in_progress, a
    message item (output_item.added, content_part.added, output_text.delta..., their .done) and a function_call
    item per call (arguments deltas and .done), then response.completed with the whole response."""

    def __init__(self, job_pk: int, model: str, body: dict) -> None:
        self.job_pk, self.model, self.body, self.created = job_pk, model, body, time.time()
        self.number, self.text, self.usage, self.open = -1, "", None, None
        self.calls: dict[int, dict] = {}  # chat call index → {"id", "name", "arguments", "output_index"}
        self.outputs = 0

    def event(self, kind: str, **fields) -> str:
        self.number += 1
        return f"event: {kind}\ndata: {json.dumps({'type': kind, 'sequence_number': self.number, **fields})}\n\n"

    def snapshot(self, status: str) -> dict:
        calls = [{"id": c["id"], "function": {"name": c["name"], "arguments": c["arguments"]}}
                 for c in self.calls.values()]
        return response(self.job_pk, self.created, self.model, status, self.body, self.text, calls, self.usage,
                        previous=self.body.get("previous_response_id"))

    def chunk(self, data: str) -> Iterator[str]:
        if self.number < 0:
            yield self.event("response.created", response=self.snapshot("in_progress"))
            yield self.event("response.in_progress", response=self.snapshot("in_progress"))
        if data == "[DONE]":
            yield from self.close_message()
            for call in self.calls.values():
                item = self.call_item(call, "completed")
                yield self.event("response.function_call_arguments.done", item_id=item["id"],
                                 output_index=call["output_index"], arguments=call["arguments"], name=call["name"])
                yield self.event("response.output_item.done", output_index=call["output_index"], item=item)
            yield self.event("response.completed", response=self.snapshot("completed"))
            return
        found = json.loads(data)
        if "error" in found:
            failed = {**self.snapshot("failed"), "error": {"code": "server_error",
                                                           "message": found["error"]["message"]}}
            yield self.event("response.failed", response=failed)
            return
        if found.get("usage"):
            self.usage = found["usage"]
        for choice in found.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                yield from self.open_message()
                self.text += delta["content"]
                yield self.event("response.output_text.delta", item_id=f"msg_{self.job_pk}",
                                 output_index=self.open, content_index=0, delta=delta["content"], logprobs=[])
            for call in delta.get("tool_calls") or []:
                yield from self.call(call)

    def open_message(self) -> Iterator[str]:
        if self.open is None:
            self.open, self.outputs = self.outputs, self.outputs + 1
            item = {"type": "message", "id": f"msg_{self.job_pk}", "status": "in_progress", "role": "assistant",
                    "content": []}
            yield self.event("response.output_item.added", output_index=self.open, item=item)
            yield self.event("response.content_part.added", item_id=item["id"], output_index=self.open,
                             content_index=0, part={"type": "output_text", "text": "", "annotations": []})

    def close_message(self) -> Iterator[str]:
        if self.open is None:
            return
        part = {"type": "output_text", "text": self.text, "annotations": [], "logprobs": []}
        yield self.event("response.output_text.done", item_id=f"msg_{self.job_pk}", output_index=self.open,
                         content_index=0, text=self.text, logprobs=[])
        yield self.event("response.content_part.done", item_id=f"msg_{self.job_pk}", output_index=self.open,
                         content_index=0, part=part)
        yield self.event("response.output_item.done", output_index=self.open, item={
            "type": "message", "id": f"msg_{self.job_pk}", "status": "completed", "role": "assistant",
            "content": [part]})

    def call_item(self, call: dict, status: str) -> dict:
        return {"type": "function_call", "id": f"fc_{self.job_pk}_{call['output_index']}", "call_id": call["id"],
                "name": call["name"], "arguments": call["arguments"] if status == "completed" else "",
                "status": status}

    def call(self, delta: dict) -> Iterator[str]:
        function = delta.get("function") or {}
        if delta["index"] not in self.calls:
            call = {"id": delta.get("id", ""), "name": function.get("name", ""), "arguments": "",
                    "output_index": self.outputs}
            self.outputs += 1
            self.calls[delta["index"]] = call
            yield self.event("response.output_item.added", output_index=call["output_index"],
                             item=self.call_item(call, "in_progress"))
        call = self.calls[delta["index"]]
        if function.get("arguments"):
            call["arguments"] += function["arguments"]
            yield self.event("response.function_call_arguments.delta", item_id=f"fc_{self.job_pk}_"
                             f"{call['output_index']}", output_index=call["output_index"],
                             delta=function["arguments"])
