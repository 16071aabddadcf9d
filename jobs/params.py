"""Generation parameters: one validation for the chat page, the APIs and batch files.

Bad values raise ParamError with a sentence a person can act on; nothing here
ever lets a request reach the engine with a value llama.cpp would choke on.
"""

import json
from dataclasses import asdict, dataclass, field

from jobs import structured, tools
from jobs.param_error import ParamError  # raised here; the pages and APIs import it from here too


@dataclass(frozen=True)
class Params:
    temperature: float = 0.7
    top_p: float = 0.95
    top_k: int = 40
    max_tokens: int = 256
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    repeat_penalty: float = 1.0
    response_format: dict | None = None  # {"type", "schema"}: answers held to the schema (jobs/structured.py)
    tools: str | None = None  # the checked functions as JSON text (jobs/tools.py): their schemas' order kept
    tool_choice: str | dict | None = None
    parallel_tool_calls: bool | None = None
    logprobs: int | None = None  # each token's log probability and this many likeliest others (0 to 20)

    def as_dict(self) -> dict:
        values = asdict(self)
        for name in OPTIONAL:
            if values[name] is None:  # most jobs: their params read as before
                del values[name]
        return values


OPTIONAL = ("response_format", "tools", "tool_choice", "parallel_tool_calls", "logprobs")
MAX_TOP_LOGPROBS = 20


LIMITS = {  # name: (type, lowest, highest)
    "temperature": (float, 0.0, 2.0),
    "top_p": (float, 0.0, 1.0),
    "top_k": (int, 0, 1000),
    "max_tokens": (int, 1, 32768),
    "seed": (int, 0, 2**31 - 1),
    "repeat_penalty": (float, 0.0, 2.0),
}
MAX_STOPS, MAX_STOP_CHARS = 4, 100


def number(name: str, value, kind: type, low, high):
    if isinstance(value, bool) or value is None or value == "":
        raise ParamError(f"{name} must be a number between {low} and {high}.", name)
    try:
        if isinstance(value, str) and not value.isascii():
            raise ValueError  # int() and float() read "٣" and "１" as digits; a person meant no number there
        parsed = kind(value) if kind is float else int(str(value).strip())
    except (TypeError, ValueError, OverflowError):  # float() of a 400-digit integer overflows
        raise ParamError(f"{name} must be {'a whole number' if kind is int else 'a number'} "
                         f"between {low} and {high}, not {shown(value)}.", name) from None
    if parsed != parsed or not low <= parsed <= high:  # NaN compares unequal to itself
        raise ParamError(f"{name} must be between {low} and {high}, not {shown(value)}.", name)
    return parsed


def shown(value) -> str:
    """The refused value as the message quotes it: short, whatever was sent."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def stops(value) -> list[str]:
    if value in (None, "", []):
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise ParamError("stop must be a string or a list of strings.", "stop")
    if len(items) > MAX_STOPS or any(not item or len(item) > MAX_STOP_CHARS for item in items):
        raise ParamError(f"stop takes up to {MAX_STOPS} non-empty strings of at most {MAX_STOP_CHARS} characters.",
                         "stop")
    if not all(unicode_text(item) for item in items):
        raise ParamError(f"stop contains {NOT_TEXT}.", "stop")
    return items


NOT_TEXT = "a lone UTF-16 surrogate (such as \\ud800) or a NUL (\\u0000), which is not text"


def unicode_text(value: str) -> bool:
    """Text that can be stored and read: JSON can carry a lone UTF-16 surrogate, which has no UTF-8 form, and a
    NUL, which PostgreSQL refuses in text and jsonb alike (a 500 there, where SQLite took it)."""
    if "\x00" in value:
        return False
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def validate(raw: dict | None, max_tokens_limit: int | None = None) -> Params:
    """Params from a mapping of user input (unknown names are refused, so typos do not pass silently)."""
    raw = dict(raw or {})
    unknown = sorted(set(raw) - set(LIMITS) - {"stop", *OPTIONAL})
    if unknown:
        raise ParamError(f"Unknown parameter{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}. "
                         f"Known: {', '.join([*LIMITS, 'stop', *OPTIONAL])}.", unknown[0])
    values = {}
    for name, (kind, low, high) in LIMITS.items():
        if raw.get(name) is not None and not (name == "seed" and raw.get(name) == ""):
            if name == "max_tokens" and max_tokens_limit:
                high = min(high, max_tokens_limit)
            values[name] = number(name, raw[name], kind, low, high)
    values["stop"] = stops(raw.get("stop"))
    if raw.get("response_format") is not None:
        values["response_format"] = structured.response_format(raw["response_format"])
    values.update(tool_params(raw))
    if raw.get("logprobs") is not None:
        values["logprobs"] = number("logprobs", raw["logprobs"], int, 0, MAX_TOP_LOGPROBS)
    return Params(**values)


def tool_params(raw: dict) -> dict:
    if raw.get("tools") in (None, []) and raw.get("tool_choice") in (None, "none", "auto"):
        return {}  # a client that sends no tools (or says none) gets a plain answer, as before
    checked = tools.tools(raw.get("tools"))
    parallel = raw.get("parallel_tool_calls")
    if parallel is not None and not isinstance(parallel, bool):
        raise ParamError("parallel_tool_calls must be true or false.", "parallel_tool_calls")
    choice = tools.tool_choice(raw.get("tool_choice"), checked)
    if not checked or choice == "none":
        return {}
    return {"tools": json.dumps(checked, ensure_ascii=False), "tool_choice": choice,
            "parallel_tool_calls": True if parallel is None else parallel}
