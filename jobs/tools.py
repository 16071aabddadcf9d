"""Tool calling's request side: OpenAI's `tools`, `tool_choice` and `parallel_tool_calls`, checked before anything
is queued. Each function's parameters are a JSON schema a call's arguments are held to when a call is required
(jobs/structured.py checks them as it checks a response_format's schema), so a schema that cannot be held to is
refused here, in words, naming the tool.
"""

import json
import re

from jobs import structured
from jobs.param_error import ParamError

MAX_TOOLS = 128  # OpenAI's own limit
NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MAX_DESCRIPTION = 10_000
CHOICES = ("none", "auto", "required")


def tools(value) -> list[dict] | None:
    """The checked tool list, in OpenAI's shape with only what the template reads; None for no tools."""
    if value is None or value == []:
        return None
    if not isinstance(value, list):
        raise ParamError("tools must be a list of {type: \"function\", function: {...}} objects.", "tools")
    if len(value) > MAX_TOOLS:
        raise ParamError(f"tools has {len(value)} functions; the panel takes up to {MAX_TOOLS}.", "tools")
    checked, seen = [], set()
    for i, tool in enumerate(value):
        where = f"tools[{i}]"
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(tool.get("function"),
                                                                                            dict):
            raise ParamError(f'{where} must be {{"type": "function", "function": {{"name": ..., ...}}}}.', where)
        function = tool["function"]
        name, description = function.get("name"), function.get("description", "")
        if not isinstance(name, str) or not NAME.match(name):
            raise ParamError(f"{where}.function.name must be 1 to 64 letters, digits, _ or -, not "
                             f"{json.dumps(name)[:40]}.", f"{where}.function.name")
        if name in seen:
            raise ParamError(f"{where}.function.name {name!r} is given twice.", f"{where}.function.name")
        seen.add(name)
        if not isinstance(description, str) or len(description) > MAX_DESCRIPTION:
            raise ParamError(f"{where}.function.description must be text of up to {MAX_DESCRIPTION:,} characters.",
                             f"{where}.function.description")
        parameters = function.get("parameters", {"type": "object", "properties": {}})
        held(parameters, f"{where}.function.parameters")
        checked.append({"type": "function", "function": {"name": name, "description": description,
                                                         "parameters": parameters}})
    structured.check_bounds({"tools": checked}, "tools")  # all of them together, as one schema would be
    return checked


def held(parameters, where: str) -> None:
    if not isinstance(parameters, dict):
        raise ParamError(f"{where} must be a JSON schema object.", where)
    try:
        structured.check_bounds(parameters, where)
        structured.check_held(parameters, where)
        structured.grammar(parameters, where)
    except ParamError as exc:
        raise ParamError(str(exc), where) from None


def tool_choice(value, checked: list[dict] | None) -> str | dict:
    """"none", "auto" or "required", or {"name": ...} for one named function of `checked`."""
    if value is None:
        return "auto" if checked else "none"
    if isinstance(value, str):
        if value not in CHOICES:
            raise ParamError(f'tool_choice must be "none", "auto", "required" or a function, not {json.dumps(value)}.',
                             "tool_choice")
        if value == "required" and not checked:
            raise ParamError('tool_choice is "required" but no tools are given.', "tool_choice")
        return value
    name = value.get("function", {}).get("name") if isinstance(value, dict) and isinstance(value.get("function"),
                                                                                             dict) else None
    if not isinstance(name, str):
        raise ParamError('tool_choice must be "none", "auto", "required" or {"type": "function", "function": '
                         '{"name": ...}}.', "tool_choice")
    names = [tool["function"]["name"] for tool in checked or []]
    if name not in names:
        raise ParamError(f"tool_choice names the function {name!r}, which is not in tools"
                         f"{' (' + ', '.join(names) + ')' if names else ''}.", "tool_choice")
    return {"name": name}
