"""Tools for a model whose chat template has none (the bundled SmolLM2's, many small models'): llama.cpp's chat
layer then drops the tools and answers in words, and a client that required a call would get none. Here, as
llama.cpp's former "generic" format did, the tools are described in the system prompt and the answer is JSON held
by a grammar: {"tool_calls": [{"name", "arguments"}, ...]} or, where a call is not required, {"response": text}.
A required call therefore always comes back well formed, its arguments valid for its function's schema.
"""

import json
import re

PROMPT = ("You can call these tools (JSON schemas of their arguments):\n{tools}\n\n"
          "Answer with one JSON object: {{\"tool_calls\": [{{\"name\": <tool name>, \"arguments\": {{...}}}}]}} "
          "to call {how}{words}.")


def chat_request(history: list[dict], params: dict, native: bool) -> dict:
    """What llama.cpp's chat layer renders for a tool-using job (and count_tokens counts): the model's own tools
    where its template shows them (`native`), else the tools in words in the system prompt and none given to the
    template ("generic": True). A named function is the only one offered, and required."""
    functions = json.loads(params["tools"]) if params.get("tools") else []
    choice = params.get("tool_choice") or ("auto" if functions else "none")
    if isinstance(choice, dict):
        functions = [f for f in functions if f["function"]["name"] == choice["name"]]
        choice = "required"
    parallel = bool(params.get("parallel_tool_calls", True))
    answer = json.loads(params["response_format"]["schema"]) if params.get("response_format") else None
    if not native:
        return {"messages": messages(history, functions, choice, parallel, answer), "generic": True,
                "functions": functions, "tool_choice": choice, "parallel_tool_calls": parallel, "answer": answer}
    request = {"messages": history, "tools": functions or None, "tool_choice": choice, "parallel_tool_calls": parallel}
    if answer is not None:
        request["json_schema"] = answer
    return request


def schema(functions: list[dict], choice: str, parallel: bool, answer: dict | None = None) -> dict:
    """The JSON schema an answer is held to: calls of `functions`, or (choice "auto") a response in words, or one
    held to `answer` (the request's response_format) where it has one."""
    held = [{"function": {"parameters": answer}}] if answer is not None else []
    parameters, defs = hoisted([*functions, *held])
    response = parameters.pop() if held else {"type": "string"}
    call = {"anyOf": [{"type": "object", "properties": {"name": {"const": f["function"]["name"]},
                                                         "arguments": arguments_schema},
                       "required": ["name", "arguments"], "additionalProperties": False}
                      for f, arguments_schema in zip(functions, parameters, strict=True)]}
    calls = {"type": "object", "properties": {"tool_calls": {"type": "array", "items": call, "minItems": 1,
                                                             **({} if parallel else {"maxItems": 1})}},
             "required": ["tool_calls"], "additionalProperties": False}
    if choice != "auto":
        return {**calls, "$defs": defs} if defs else calls
    words = {"type": "object", "properties": {"response": response}, "required": ["response"],
             "additionalProperties": False}
    return {"anyOf": [calls, words], **({"$defs": defs} if defs else {})}


def hoisted(functions: list[dict]) -> tuple[list[dict], dict]:
    """Each function's parameters, and the definitions they refer to moved to the answer schema's root: a `$ref`
    such as pydantic writes for a nested model ("#/$defs/City") means the root of the document it is in, which
    inside the answer's schema is no longer the parameters'. Renamed per function, so two functions' definitions
    of one name do not meet; "#" itself (parameters that hold themselves) becomes a definition too."""
    defs, found = {}, []
    for i, function in enumerate(functions):
        parameters = dict(function["function"]["parameters"])
        local = {**parameters.pop("definitions", {}), **parameters.pop("$defs", {})}
        names = {name: f"f{i}_{name}" for name in local}
        root = f"f{i}"

        def moved(node, names=names, root=root):
            if isinstance(node, list):
                return [moved(item) for item in node]
            if not isinstance(node, dict):
                return node
            found_node = {key: moved(value) for key, value in node.items()}
            ref = node.get("$ref")
            if ref == "#":
                found_node["$ref"] = f"#/$defs/{root}"
            elif isinstance(ref, str):
                for prefix in ("#/$defs/", "#/definitions/"):
                    name = ref.removeprefix(prefix).split("/")[0]
                    if ref.startswith(prefix) and name in names:
                        found_node["$ref"] = f"#/$defs/{names[name]}" + ref.removeprefix(prefix)[len(name):]
            return found_node

        defs.update({names[name]: moved(definition) for name, definition in local.items()})
        found.append(moved(parameters))
        if '"$ref": "#"' in json.dumps(function["function"]["parameters"]):
            defs[root] = found[-1]
    return found, defs


def messages(history: list[dict], functions: list[dict], choice: str, parallel: bool,
             answer: dict | None = None) -> list[dict]:
    """The conversation as a template without tools can show it: the tools in the system prompt, the assistant's
    calls as the JSON it would have answered, and each tool's result as a user message."""
    described = json.dumps([{"name": f["function"]["name"], "description": f["function"].get("description", ""),
                             "parameters": f["function"]["parameters"]} for f in functions], ensure_ascii=False)
    how = "one or more tools" if parallel else "one tool"
    words = ""
    if choice == "auto":
        words = (", or {\"response\": <your answer>} to answer in words" if answer is None else
                 f", or {{\"response\": <your answer as JSON of this schema: {json.dumps(answer)}>}} to answer")
    note = PROMPT.format(tools=described, how=how, words=words) if functions else ""
    shown: list[dict] = []
    for message in history:
        if message.get("tool_calls"):
            calls = [{"name": c["function"]["name"], "arguments": arguments(c["function"]["arguments"])}
                     for c in message["tool_calls"]]
            shown.append({"role": "assistant", "content": json.dumps({"tool_calls": calls}, ensure_ascii=False)})
        elif message["role"] == "tool":
            result = f"Result of tool call {message['tool_call_id']}: {message['content']}"
            if shown and shown[-1]["role"] == "user":  # several results: one message, so roles still alternate
                shown[-1] = {"role": "user", "content": shown[-1]["content"] + "\n" + result}
            else:
                shown.append({"role": "user", "content": result})
        else:
            shown.append({"role": message["role"], "content": message["content"]})
    if note and shown and shown[0]["role"] == "system":
        shown[0] = {"role": "system", "content": shown[0]["content"] + "\n\n" + note}
    elif note:
        shown.insert(0, {"role": "system", "content": note})
    return shown


def arguments(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse(text: str, held: bool = False) -> dict:
    """The whole answer read: content and tool_calls as llama.cpp's parser gives them (arguments as the JSON text
    the model wrote); ValueError if it is not the whole JSON the grammar holds it to (cut by max_tokens)."""
    json.loads(text)
    return partial(text, held)


CALLS = re.compile(r'\s*\{\s*"(tool_calls|response)"\s*:\s*')
CALL = re.compile(r'\s*[\[,]\s*\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"arguments"\s*:\s*')


def partial(text: str, held: bool = False) -> dict:
    """What the answer written so far holds: the response's text so far (`held` to a response_format: its JSON
    text, as the content of an answer held to a schema is), or each call whose name is complete with its
    arguments' JSON text so far; streamed as they grow (jobs/engine/toolcalls.py)."""
    found = CALLS.match(text)
    if found is None:
        return {"content": "", "tool_calls": []}
    if found.group(1) == "response" and held:
        end = value_end(text, found.end())
        return {"content": text[found.end():len(text) if end is None else end], "tool_calls": []}
    if found.group(1) == "response":
        return {"content": string_so_far(text, found.end()), "tool_calls": []}
    calls, at = [], found.end()
    while (call := CALL.match(text, at)) is not None:
        end = value_end(text, call.end())
        calls.append({"name": json.loads(f'"{call.group(1)}"'), "id": "",
                      "arguments": text[call.end():len(text) if end is None else end]})
        if end is None:
            break
        closing = re.compile(r"\s*\}").match(text, end)
        if closing is None:
            break
        at = closing.end()
    return {"content": "", "tool_calls": calls}


def string_so_far(text: str, at: int) -> str:
    """The JSON string that starts at `at` (its opening quote), decoded as far as it is written."""
    if text[at:at + 1] != '"':
        return ""
    raw, i = [], at + 1
    while i < len(text):
        char = text[i]
        if char == '"':
            break
        if char == "\\":
            escape = text[i:i + 6] if text[i + 1:i + 2] == "u" else text[i:i + 2]
            if len(escape) < (6 if text[i + 1:i + 2] == "u" else 2):
                break  # an escape not yet whole
            raw.append(escape)
            i += len(escape)
            continue
        raw.append(char)
        i += 1
    if raw and text[i:i + 1] != '"' and re.fullmatch(r"\\u[dD][89abAB][0-9a-fA-F]{2}", raw[-1]):
        raw.pop()  # the first half of a surrogate pair: its character comes with the second
    return json.loads('"' + "".join(raw) + '"')


def value_end(text: str, at: int) -> int | None:
    """Where the JSON value that starts at `at` ends, or None if it is not whole yet."""
    depth, i, in_string = 0, at, False
    while i < len(text):
        char = text[i]
        if in_string:
            if char == "\\":
                i += 1
            elif char == '"':
                in_string = False
                if depth == 0:
                    return i + 1
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            if depth == 0:
                return i  # a bare value's end: the closing of what holds it
            depth -= 1
            if depth == 0:
                return i + 1
        elif depth == 0 and char in ", \n\t\r":
            return i if i > at else None
        i += 1
    return None
