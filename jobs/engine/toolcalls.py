"""A tool-using answer as it is generated: the model writes its calls in its own format (Hermes' <tool_call>,
Llama 3's JSON, Mistral's [TOOL_CALLS], ...); llama.cpp's parser for that format (models_app/llamacpp/chat.py)
reads the text so far, and what it finds goes out as the content's new text (token events) and each call's new
name and arguments (tool_call events), which /v1 streams as OpenAI's deltas. The job keeps the parsed content as
its output and the calls as its tool_calls.
"""

from collections.abc import Callable

from jobs.engine import generic_tools
from models_app.llamacpp import chat


class ToolCalls:
    def __init__(self, job_id: int, syntax: dict, on_text: Callable[[str], None],
                 on_call: Callable[[dict], None]) -> None:
        self.job_id, self.syntax, self.on_text, self.on_call = job_id, syntax, on_text, on_call
        self.text = ""  # what the model wrote
        self.content = ""  # the content sent so far
        self.calls: list[dict] = []  # each call as sent so far: id, name, arguments

    def add(self, piece: str) -> None:
        self.text += piece
        if self.syntax.get("generic"):  # JSON held by a grammar (jobs/engine/generic_tools.py)
            self.send(generic_tools.partial(self.text, self.syntax.get("held", False)))
            return
        try:
            found = chat.parse(self.text, self.syntax, partial=True)
        except chat.ChatError:
            return  # not readable yet: the next piece may make it so
        self.send(found)

    def end(self) -> tuple[str, list[dict]]:
        """The whole answer read: its content and its calls in OpenAI's shape (as much as was sent, if the
        model's text does not parse as a whole, cut by max_tokens)."""
        try:
            self.send(generic_tools.parse(self.text, self.syntax.get("held", False)) if self.syntax.get("generic") else
                      chat.parse(self.text, self.syntax, partial=False))
        except (chat.ChatError, ValueError, KeyError, TypeError):
            if self.syntax.get("generic") and not (self.content or self.calls):
                self.send({"content": self.text, "tool_calls": []})  # cut short before anything could be read
        calls = [{"id": call["id"], "type": "function",
                  "function": {"name": call["name"], "arguments": call["arguments"]}}
                 for call in self.calls if call["name"]]
        return self.content, calls

    def send(self, found: dict) -> None:
        content = found.get("content") or ""
        if content.startswith(self.content) and len(content) > len(self.content):
            self.on_text(content[len(self.content):])
            self.content = content
        for index, call in enumerate(found.get("tool_calls") or []):
            if index == len(self.calls):
                self.calls.append({"id": call.get("id") or f"call_{self.job_id}_{index}", "name": "",
                                   "arguments": ""})
            sent, delta = self.calls[index], {}
            if call.get("name") and not sent["name"]:
                sent["name"] = delta["name"] = call["name"]
                delta["id"] = sent["id"]
            arguments = call.get("arguments") or ""
            if sent["name"] and arguments.startswith(sent["arguments"]) and len(arguments) > len(sent["arguments"]):
                delta["arguments"] = arguments[len(sent["arguments"]):]
                sent["arguments"] = arguments
            if delta:
                self.on_call({"index": index, **delta})
