"""Reading a batch file: the OpenAI Batch input format (JSONL) or a CSV of prompts.

Every line is judged on its own: good lines become requests, bad lines are kept
with their number and a reason a person can act on. A problem that makes the
whole file unreadable (not UTF-8, a bad CSV header, too many lines) raises
FileRefused instead. Pure: no database, so the rules are tested line by line.
"""

import csv
import io
import json
from dataclasses import dataclass, field

from jobs import embedding_inputs
from jobs.params import NOT_TEXT, ParamError, unicode_text, validate

CHAT_URL = "/v1/chat/completions"
COMPLETIONS_URL = "/v1/completions"
EMBEDDINGS_URL = "/v1/embeddings"
ENDPOINTS = (CHAT_URL, COMPLETIONS_URL, EMBEDDINGS_URL)
LINE_KEYS = {"custom_id", "method", "url", "body"}
ROLES = {"system", "user", "assistant", "developer"}  # "developer" is OpenAI's newer name for system
IGNORED_BODY = {"model", "user"}  # the page runs every line on its chosen deployment; /v1 checks `model` itself
CSV_COLUMNS = ("prompt", "system", "max_tokens", "custom_id")
MAX_CUSTOM_ID = 200
SHOWN_CHARS = 40
BROKEN_TEXT = "{what} contains " + NOT_TEXT + "."


class FileRefused(ValueError):
    def __init__(self, message: str, rejected: list[dict] | None = None) -> None:
        super().__init__(message)
        self.rejected = rejected or []


class LineError(ValueError):
    pass


@dataclass
class Request:
    line: int
    custom_id: str
    messages: list[dict]
    params: dict
    prompt: str = ""  # a /v1/completions line's, instead of messages
    inputs: list = field(default_factory=list)  # a /v1/embeddings line's texts or token lists
    url: str = CHAT_URL
    model: object = None  # the line's body.model as sent; the OpenAI door holds every line to the batch's


@dataclass
class Parsed:
    format: str  # "jsonl" or "csv"
    requests: list[Request] = field(default_factory=list)
    rejected: list[dict] = field(default_factory=list)  # {"line", "reason", "custom_id"}

    def reject(self, line: int, reason: str, custom_id: str = "", code: str | None = None) -> None:
        bad = {"line": line, "reason": reason, "custom_id": custom_id}
        self.rejected.append({**bad, "code": code} if code else bad)


def detect_format(name: str, data: bytes) -> str:
    lower = name.lower()
    if lower.endswith(".csv"):
        return "csv"
    if lower.endswith((".jsonl", ".json", ".ndjson")):
        return "jsonl"
    return "jsonl" if data.lstrip()[:1] == b"{" else "csv"


def parse(name: str, data: bytes, max_lines: int, max_tokens_limit: int | None = None,
          kind: str | None = None) -> Parsed:
    """The file's requests and rejected lines, read as `kind` (else as its name or content suggests);
    FileRefused when no line can be read at all."""
    if not data.strip():
        raise FileRefused("The file is empty.")
    kind = kind or detect_format(name, data)
    reader = parse_jsonl if kind == "jsonl" else parse_csv
    return reader(data, max_lines, max_tokens_limit)


def shown(value) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return repr(text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…")


def check_custom_id(value, seen: dict[str, int]) -> str:
    if value is None or value == "":
        raise LineError("custom_id is missing: give every line its own custom_id.")
    if not isinstance(value, str):
        raise LineError(f"custom_id must be a string, not {shown(value)}.")
    if not unicode_text(value):
        raise LineError(BROKEN_TEXT.format(what="custom_id"))
    if len(value) > MAX_CUSTOM_ID:
        raise LineError(f"custom_id is longer than {MAX_CUSTOM_ID} characters.")
    if value in seen:
        raise LineError(f"custom_id {shown(value)} is already used on line {seen[value]}.")
    return value


def check_params(raw: dict, max_tokens_limit: int | None) -> dict:
    try:
        return validate(raw, max_tokens_limit).as_dict()
    except ParamError as exc:
        raise LineError(str(exc)) from None


# ---- OpenAI Batch input (JSONL) ----

def parse_jsonl(data: bytes, max_lines: int, max_tokens_limit: int | None) -> Parsed:
    parsed, seen = Parsed("jsonl"), {}
    lines = [(number, raw) for number, raw in enumerate(data.split(b"\n"), start=1) if raw.strip()]
    if len(lines) > max_lines:
        raise FileRefused(f"The file has {len(lines)} requests; a batch takes at most {max_lines}. "
                          "Split it into smaller files.")
    for number, raw in lines:
        custom_id = ""
        try:
            entry = json_line(raw)
            custom_id = entry.get("custom_id") if isinstance(entry.get("custom_id"), str) else ""
            custom_id = custom_id if unicode_text(custom_id) else ""  # it is shown and exported: text only
            request = openai_request(number, entry, seen, max_tokens_limit)
            if parsed.requests and request.url != parsed.requests[0].url:
                raise LineError(f"url must be {parsed.requests[0].url!r}, as on line {parsed.requests[0].line}: "
                                "every line of a batch uses the same endpoint.")
        except LineError as exc:
            parsed.reject(number, str(exc), custom_id)
            continue
        seen[request.custom_id] = number
        parsed.requests.append(request)
    return parsed


def check_jsonl(data: bytes, max_lines: int) -> None:
    """FileRefused, in JSONL's words, unless the file is an OpenAI batch input file with a line that can run:
    what a script uploads is checked when it arrives, not when a batch is made of it."""
    what = "a batch input file is JSONL: one {\"custom_id\", \"method\", \"url\", \"body\"} object per line"
    if not data.strip():
        raise FileRefused(f"The file is empty: {what}.")
    parsed = parse_jsonl(data, max_lines, None)
    if parsed.requests:
        return  # its bad lines, if any, are judged with the batch's deployment, each on its own
    try:
        data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise FileRefused(f"The file is not text (line {line} is not UTF-8): {what}.") from None
    said = "; ".join(f"line {bad['line']}: {bad['reason']}" for bad in parsed.rejected[:3])
    raise FileRefused(f"No line of the file is a request that can run, so it is not a batch input file ({what}). "
                      f"{said}")


def json_line(raw: bytes) -> dict:
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise LineError("The line is not UTF-8 text.") from None
    try:
        entry = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LineError(f"Not valid JSON: {exc.msg} at column {exc.colno}.") from None
    except (ValueError, RecursionError):  # a number too long to convert, arrays nested too deep
        raise LineError("Not valid JSON that can be read: a number is too long or it is nested too deep.") from None
    if not isinstance(entry, dict):
        raise LineError("Each line must be a JSON object with custom_id, method, url and body.")
    return entry


def openai_request(number: int, entry: dict, seen: dict[str, int], max_tokens_limit: int | None) -> Request:
    unknown = sorted(set(entry) - LINE_KEYS)
    if unknown:
        raise LineError(f"Unknown field{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}: "
                        "a line has custom_id, method, url and body.")
    custom_id = check_custom_id(entry.get("custom_id"), seen)
    if entry.get("method") != "POST":
        raise LineError(f"method must be \"POST\", not {shown(entry.get('method'))}.")
    url = entry.get("url")
    if url not in ENDPOINTS:
        raise LineError(f"url must be \"{CHAT_URL}\", \"{COMPLETIONS_URL}\" or \"{EMBEDDINGS_URL}\", not {shown(url)}.")
    body = entry.get("body")
    if not isinstance(body, dict):
        wants = {CHAT_URL: "messages", COMPLETIONS_URL: "a prompt", EMBEDDINGS_URL: "an input"}[url]
        raise LineError(f"body is missing: it must be an object with {wants}.")
    if url == EMBEDDINGS_URL:
        return Request(number, custom_id, [], check_params({}, max_tokens_limit), inputs=embedding_line(body),
                       url=url, model=body.get("model"))
    if url == COMPLETIONS_URL:
        return Request(number, custom_id, [], body_params(body, max_tokens_limit, "prompt"),
                       prompt=completion_prompt(body.get("prompt")), url=url, model=body.get("model"))
    return Request(number, custom_id, chat_messages(body.get("messages")), body_params(body, max_tokens_limit),
                   model=body.get("model"))


def embedding_line(body: dict) -> list:
    """An embedding line's inputs; its vectors come back as floats."""
    unknown = sorted(set(body) - {"input", "model", "user", "encoding_format"})
    if unknown:
        raise LineError(f"body has {', '.join(unknown)}, which an embedding line does not take (input, model, "
                        "encoding_format).")
    if body.get("encoding_format", "float") != "float":
        raise LineError("body.encoding_format must be float, or left out: a batch's output gives the numbers.")
    try:
        return embedding_inputs.checked(body.get("input"), "body.input")
    except ParamError as exc:
        raise LineError(str(exc)) from None


def completion_prompt(value) -> str:
    if isinstance(value, list) and len(value) == 1:
        value = value[0]  # OpenAI clients may send one prompt as a one-item list
    if not isinstance(value, str) or not value.strip():
        raise LineError("body.prompt must be a string with text (one prompt per line).")
    if not unicode_text(value):
        raise LineError(BROKEN_TEXT.format(what="body.prompt"))
    return value


def chat_messages(value) -> list[dict]:
    if not isinstance(value, list) or not value:
        raise LineError("body.messages is missing or empty: give a list of {\"role\", \"content\"} objects.")
    messages = [chat_message(position, message) for position, message in enumerate(value)]
    if not any(m["role"] == "user" and m["content"].strip() for m in messages):
        raise LineError("body.messages has no user message with text.")
    return messages


def chat_message(position: int, message) -> dict:
    where = f"body.messages[{position}]"
    if not isinstance(message, dict):
        raise LineError(f"{where} must be an object with role and content.")
    role = message.get("role")
    if role not in ROLES:
        raise LineError(f"{where}.role must be system, user or assistant, not {shown(role)}.")
    return {"role": "system" if role == "developer" else role, "content": message_text(where, message.get("content"))}


def message_text(where: str, content) -> str:
    if isinstance(content, list) and content and all(
            isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
            for part in content):
        content = "".join(part["text"] for part in content)
    if isinstance(content, str):
        if not unicode_text(content):
            raise LineError(BROKEN_TEXT.format(what=f"{where}.content"))
        return content
    raise LineError(f"{where}.content must be text (a string, or a list of {{\"type\": \"text\"}} parts).")


def body_params(body: dict, max_tokens_limit: int | None, text: str = "messages") -> dict:
    raw = {k: v for k, v in body.items() if k not in IGNORED_BODY and k != text}
    if raw.get("n", 1) != 1:
        raise LineError("n must be 1: a batch line gives one answer.")
    if raw.get("stream", False) is not False:
        raise LineError("stream must be false in a batch file.")
    raw.pop("n", None)
    raw.pop("stream", None)
    if text == "messages":
        chat_logprobs(raw)
    if "max_completion_tokens" in raw:
        if "max_tokens" in raw:
            raise LineError("Give max_tokens or max_completion_tokens, not both.")
        raw["max_tokens"] = raw.pop("max_completion_tokens")
    return check_params(raw, max_tokens_limit)


def chat_logprobs(raw: dict) -> None:
    """A chat line's `logprobs` true and `top_logprobs` 0-20, as /v1 takes them: the job's `logprobs` is how many
    others each token lists (a completion line's `logprobs` already is)."""
    wanted, top = raw.pop("logprobs", None), raw.pop("top_logprobs", None)
    if wanted not in (None, True, False):
        raise LineError("logprobs must be true or false.")
    if top is not None and wanted is not True:
        raise LineError("top_logprobs needs logprobs set to true.")
    if wanted:
        raw["logprobs"] = 0 if top is None else top


# ---- CSV: prompt, optional system, max_tokens, custom_id ----

def parse_csv(data: bytes, max_lines: int, max_tokens_limit: int | None) -> Parsed:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise FileRefused(f"Line {line} is not UTF-8 text: save the file as UTF-8 CSV.") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        columns = csv_header(next(reader, None))
        rows = list(csv_rows(reader))
    except csv.Error as exc:
        raise FileRefused(f"Line {reader.line_num}: the CSV cannot be read ({exc}).") from None
    if len(rows) > max_lines:
        raise FileRefused(f"The file has {len(rows)} prompts; a batch takes at most {max_lines}. "
                          "Split it into smaller files.")
    parsed, seen = Parsed("csv"), {}
    for number, cells in rows:
        given = row_custom_id(number, columns, cells)
        try:
            request = csv_request(number, columns, cells, seen, max_tokens_limit)
        except LineError as exc:
            parsed.reject(number, str(exc), given)
            continue
        seen[request.custom_id] = number
        parsed.requests.append(request)
    return parsed


def row_custom_id(number: int, columns: list[str], cells: list[str]) -> str:
    """The id a row goes by, even when the row is bad: its custom_id cell, else `line-N`."""
    if "custom_id" not in columns:
        return f"line-{number}"
    position = columns.index("custom_id")
    return cells[position].strip() if position < len(cells) else ""


def csv_header(header: list[str] | None) -> list[str]:
    columns = [name.strip().lower() for name in header or []]
    expected = "Columns: prompt (required), system, max_tokens, custom_id."
    if "prompt" not in columns:
        raise FileRefused(f"Line 1 must be a header naming the columns, with a prompt column. {expected}")
    unknown = [name for name in columns if name not in CSV_COLUMNS]
    if unknown:
        raise FileRefused(f"Unknown column{'s' if len(unknown) > 1 else ''} in the header (line 1): "
                          f"{', '.join(repr(n) for n in unknown)}. {expected}")
    doubled = sorted({name for name in columns if columns.count(name) > 1})
    if doubled:
        raise FileRefused(f"The header (line 1) names {', '.join(doubled)} twice.")
    return columns


def csv_rows(reader):
    """(line where the row starts, cells) for every row that is not blank."""
    start = reader.line_num + 1
    for cells in reader:
        if any(cell.strip() for cell in cells):
            yield start, cells
        start = reader.line_num + 1


def csv_request(number: int, columns: list[str], cells: list[str], seen: dict[str, int],
                max_tokens_limit: int | None) -> Request:
    if len(cells) != len(columns):
        raise LineError(f"The row has {len(cells)} fields; the header has {len(columns)}.")
    row = dict(zip(columns, cells, strict=True))
    prompt = row["prompt"]
    if not prompt.strip():
        raise LineError("The prompt is empty.")
    custom_id = check_custom_id(row["custom_id"].strip(), seen) if "custom_id" in row else f"line-{number}"
    system = row.get("system", "").strip()
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
    max_tokens = row.get("max_tokens", "").strip()
    return Request(number, custom_id, messages, check_params({"max_tokens": max_tokens or None}, max_tokens_limit))
