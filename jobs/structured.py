"""Structured outputs: what OpenAI's `response_format` asks an answer to look like, checked before anything is
queued and made a grammar the engine samples under (llama.cpp's JSON-schema-to-grammar, as llama-server's).

A schema is refused in words, naming `response_format`, when it is not one, when it is too big or too deep to
convert in bounded time and memory, or when llama.cpp cannot make or read a grammar of it: a client is never
sent an answer that was not held to the schema it asked for.
"""

import functools
import json
import re

from jobs.param_error import ParamError

PARAM = "response_format"
MAX_SCHEMA_CHARS = 100_000  # the schema as JSON; OpenAI's own limits are far below (5,000 properties at most)
MAX_DEPTH = 64  # nesting of objects and arrays inside the schema
MAX_NODES = 20_000  # objects, arrays and values in the schema, all counted
MAX_GRAMMAR_CHARS = 1_000_000  # the grammar made of it
MAX_PATTERNS = 50  # distinct `pattern`s, each tried alone
# Assertions no grammar made by llama.cpp holds an answer to (it drops them silently): refused, since the answer
# would not always validate. `format` is an annotation in JSON Schema, not an assertion, and is taken.
NOT_HELD = {"multipleOf", "uniqueItems", "not", "if", "then", "else", "minProperties", "maxProperties",
            "patternProperties", "dependentRequired", "dependentSchemas", "contains", "minContains", "maxContains",
            "propertyNames", "unevaluatedProperties", "unevaluatedItems"}
BOUNDS = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}  # held on integers only
# llama.cpp's grammar takes repetitions up to 2,000 (MAX_REPETITION_THRESHOLD): past that it refuses a minimum
# and, silently, makes a maximum unbounded.
MAX_REPEAT = 2000
COUNTS = {"minLength", "maxLength", "minItems", "maxItems"}
PATTERN_COUNT = re.compile(r"\{\s*(\d+)\s*(?:,\s*(\d*)\s*)?\}")
UNEXPRESSED = {"type": "string", "pattern": "x"}  # not anchored: the converter accepts any string instead
# Where a schema holds schemas: name → schema maps, lists of schemas, one schema.
SCHEMA_MAPS = {"properties", "$defs", "definitions"}
SCHEMA_LISTS = {"anyOf", "oneOf", "allOf", "prefixItems"}
SCHEMA_ONES = {"items", "additionalProperties"}


def response_format(value) -> dict | None:
    """The checked response_format, None for plain text; ParamError naming the field at fault. The schema is kept
    as JSON text: the order of its properties is the order of the answer's keys, which a jsonb column (PostgreSQL)
    would not keep."""
    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise ParamError(f'{PARAM} must be an object with a type: "text", "json_object" or "json_schema".', PARAM)
    kind = value["type"]
    if kind == "text":
        return None
    if kind == "json_object":
        schema = value.get("schema", {"type": "object"})  # llama-server also takes a schema here
        where = f"{PARAM}.schema"
    elif kind == "json_schema":
        wrapper = value.get("json_schema")
        if not isinstance(wrapper, dict):
            raise ParamError(f"{PARAM}.json_schema must be an object with a name and a schema.", f"{PARAM}.json_schema")
        name, strict = wrapper.get("name"), wrapper.get("strict")
        if name is not None and not (isinstance(name, str) and 0 < len(name) <= 64):
            raise ParamError(f"{PARAM}.json_schema.name must be a name of 1 to 64 characters.",
                             f"{PARAM}.json_schema.name")
        if strict is not None and not isinstance(strict, bool):
            raise ParamError(f"{PARAM}.json_schema.strict must be true or false.", f"{PARAM}.json_schema.strict")
        schema = wrapper.get("schema", {"type": "object"})
        where = f"{PARAM}.json_schema.schema"
    else:
        raise ParamError(f'{PARAM}.type must be "text", "json_object" or "json_schema", not {json.dumps(kind)}.',
                         f"{PARAM}.type")
    if isinstance(schema, dict) and not schema:
        schema = {"type": "object"}
    check_bounds(schema, where)
    check_held(schema, where)
    grammar(schema, where)
    return {"type": kind, "schema": json.dumps(schema, ensure_ascii=False)}


def check_bounds(schema, where: str) -> None:
    """Refuse what would cost the converter unbounded time or memory, before it runs; iterative, so no depth
    of nesting can exhaust Python's stack here."""
    if not isinstance(schema, dict):
        raise ParamError(f"{where} must be a JSON schema object.", PARAM)
    nodes, stack = 0, [(schema, 1)]
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if depth > MAX_DEPTH:
            raise ParamError(f"{where} nests deeper than {MAX_DEPTH} levels; the panel takes schemas up to that.",
                             PARAM)
        if nodes > MAX_NODES:
            raise ParamError(f"{where} has more than {MAX_NODES:,} parts; the panel takes schemas up to that.", PARAM)
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
        nodes += sum(1 for child in children if not isinstance(child, dict | list))
    size = len(json.dumps(schema))
    if size > MAX_SCHEMA_CHARS:
        raise ParamError(f"{where} is {size:,} characters as JSON; the panel takes schemas up to "
                         f"{MAX_SCHEMA_CHARS:,}.", PARAM)


def check_held(schema: dict, where: str) -> None:
    """Refuse a schema with an assertion the grammar would not hold the answer to: NOT_HELD keywords, bounds on a
    number that may be fractional, and a `pattern` llama.cpp's converter cannot express (it makes such a string
    accept any text, and only warns)."""
    patterns, stack = set(), [schema]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        dropped = sorted(node.keys() & NOT_HELD)
        if dropped:
            raise ParamError(f"{where} uses {dropped[0]!r}, which a grammar cannot hold an answer to; leave it "
                             f"out and check it in your code.", PARAM)
        types = node.get("type")
        whole = types == "integer" or (isinstance(types, list) and "integer" in types and "number" not in types)
        bounds = sorted(node.keys() & BOUNDS)
        if bounds and not whole:
            raise ParamError(f"{where} puts {bounds[0]!r} on a number that is not an integer; a grammar holds "
                             f"bounds on integers only.", PARAM)
        counts = [key for key in sorted(node.keys() & COUNTS) if isinstance(node[key], int) and node[key] > MAX_REPEAT]
        if counts:
            raise ParamError(f"{where} sets {counts[0]} to {node[counts[0]]:,}; a grammar holds lengths and counts "
                             f"up to {MAX_REPEAT:,}.", PARAM)
        if isinstance(node.get("pattern"), str):
            patterns.add(node["pattern"])
        for key in SCHEMA_MAPS & node.keys():
            if isinstance(node[key], dict):
                stack.extend(node[key].values())
        for key in SCHEMA_LISTS & node.keys():
            if isinstance(node[key], list):
                stack.extend(node[key])
        stack.extend(node[key] for key in SCHEMA_ONES & node.keys())
    if len(patterns) > MAX_PATTERNS:
        raise ParamError(f"{where} has {len(patterns)} patterns; the panel takes up to {MAX_PATTERNS}.", PARAM)
    for pattern in sorted(patterns):
        if any(int(number) > MAX_REPEAT for found in PATTERN_COUNT.findall(pattern) for number in found if number):
            raise ParamError(f"{where} has the pattern {pattern!r}, which repeats more than {MAX_REPEAT:,} times; "
                             f"a grammar holds up to that.", PARAM)
        if grammar({"type": "string", "pattern": pattern}, where) == any_string():
            raise ParamError(f"{where} has the pattern {pattern!r}, which llama.cpp cannot turn into a grammar "
                             f"(a pattern must start with ^ and end with $, without lookarounds or "
                             f"backreferences).", PARAM)


@functools.cache
def any_string() -> str:
    """The grammar llama.cpp's converter makes for a pattern it cannot express (it logs a warning, once here)."""
    return grammar(UNEXPRESSED)


def grammar(schema: dict, where: str = PARAM) -> str:
    """The grammar for a schema that passed check_bounds; ParamError when llama.cpp cannot make or read one."""
    from models_app.llamacpp import chat

    try:
        made = chat.schema_grammar(schema)
    except chat.ChatError as exc:
        raise ParamError(f"{where} cannot be turned into a grammar to hold answers to: {exc}", PARAM) from None
    if len(made) > MAX_GRAMMAR_CHARS:
        raise ParamError(f"{where} makes a grammar of {len(made):,} characters; the panel takes up to "
                         f"{MAX_GRAMMAR_CHARS:,} (long enums, patterns or length limits make it grow).", PARAM)
    if not chat.grammar_parses(made):
        raise ParamError(f"{where} makes a grammar llama.cpp cannot use: a rule that refers to itself before "
                         f"anything is written (a $ref that leads only back to itself) is one cause.", PARAM)
    return made


@functools.lru_cache(maxsize=64)
def grammar_of(schema: str) -> str:
    """The grammar of a checked response_format's schema (its JSON text), for the engine: made once per schema,
    not once per answer."""
    return grammar(json.loads(schema))
