"""The answer schema for a model whose template shows no tools (jobs/engine/generic_tools.py): functions whose
parameters refer to their own definitions, as pydantic writes a nested model ("$ref": "#/$defs/City"), keep them
once their parameters sit inside the answer's schema, two functions' definitions of one name stay apart, and the
schema becomes a grammar (instructor's tool mode met "$defs not found" before)."""

import jsonschema
import pytest

from jobs import structured
from jobs.engine import generic_tools


def function(name: str, city: dict, recursive: bool = False) -> dict:
    parameters = {"type": "object", "properties": {"city": {"$ref": "#/$defs/City"}}, "required": ["city"],
                  "$defs": {"City": city}}
    if recursive:
        parameters["properties"]["next"] = {"$ref": "#"}
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


NAMED = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
COUNTED = {"type": "object", "properties": {"people": {"type": "integer"}}, "required": ["people"]}


@pytest.mark.parametrize("choice", ["required", "auto"])
def test_definitions_move_to_the_root_and_stay_apart(choice):
    functions = [function("trip", NAMED), function("census", COUNTED, recursive=True)]
    schema = generic_tools.schema(functions, choice, parallel=True)
    assert structured.grammar(schema), "it becomes a grammar"
    good = {"tool_calls": [{"name": "trip", "arguments": {"city": {"name": "Rome"}}},
                           {"name": "census", "arguments": {"city": {"people": 3}, "next": {"city": {"people": 1}}}}]}
    jsonschema.validate(good, schema)
    crossed = {"tool_calls": [{"name": "trip", "arguments": {"city": {"people": 3}}}]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(crossed, schema)  # trip's City is not census's
    assert functions[0]["function"]["parameters"]["$defs"] == {"City": NAMED}, "the request's tools are untouched"


ANSWERS = [
    '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Pa\\"ris \\u00e9", "days": [1, 2]}}, '
    '{"name": "count", "arguments": 12}]}',
    '{ "tool_calls" : [ { "name" : "f" , "arguments" : { } } ] }',
    '{"response": "Hello \\u00e9t\\u00e9\\n \\ud83d\\ude00 \\"quoted\\" world"}',
]


@pytest.mark.parametrize("answer", ANSWERS)
def test_every_prefix_streams_a_prefix_of_the_whole(answer):
    """What a client is sent as the answer grows (content, a call's name once whole, its arguments' text) only
    ever grows: each prefix's reading is a prefix of the whole answer's."""
    whole = generic_tools.parse(answer)
    for end in range(len(answer) + 1):
        found = generic_tools.partial(answer[:end])
        assert whole["content"].startswith(found["content"]), (end, found)
        assert len(found["tool_calls"]) <= len(whole["tool_calls"])
        for seen, final in zip(found["tool_calls"], whole["tool_calls"], strict=False):
            assert seen["name"] == final["name"] and final["arguments"].startswith(seen["arguments"]), (end, seen)
    assert all(json_of(call["arguments"]) is not None for call in whole["tool_calls"]), "whole arguments are JSON"
    with pytest.raises(ValueError):
        generic_tools.parse(answer[:-1])


def json_of(text: str):
    import json

    return json.loads(text)


CITY = {"type": "object", "properties": {"city": {"$ref": "#/$defs/Name"}, "people": {"type": "integer"}},
        "required": ["city", "people"], "additionalProperties": False,
        "$defs": {"Name": {"type": "string", "maxLength": 30}}}


def test_an_answer_in_words_is_held_to_the_requests_response_format():
    """Tools offered ("auto") with a response_format: a call, or a response that is the schema's JSON (as
    llama-server holds the content of a tool-using answer to its json_schema), its definitions kept."""
    schema = generic_tools.schema([function("trip", NAMED)], "auto", parallel=True, answer=CITY)
    assert structured.grammar(schema), "it becomes a grammar"
    jsonschema.validate({"response": {"city": "Rome", "people": 3}}, schema)
    jsonschema.validate({"tool_calls": [{"name": "trip", "arguments": {"city": {"name": "Rome"}}}]}, schema)
    for bad in ({"response": "Rome, three people"}, {"response": {"city": "Rome"}},
                {"response": {"city": "x" * 31, "people": 3}}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
    assert "$defs" in CITY, "the request's schema is untouched"
    shown = generic_tools.messages([{"role": "user", "content": "Where?"}], [function("trip", NAMED)], "auto",
                                   True, CITY)
    assert '"people"' in shown[0]["content"], "the prompt says what the answer is held to"


@pytest.mark.parametrize("answer", ['{"response": {"city": "Ro\\"me", "people": [1, {"a": "}"}]}}',
                                    '{"response": "a string value"}', '{ "response" : 12 }'])
def test_a_held_response_streams_its_json_text(answer):
    whole = generic_tools.parse(answer, held=True)
    assert json_of(whole["content"]) == json_of(answer)["response"], whole
    for end in range(len(answer) + 1):
        assert whole["content"].startswith(generic_tools.partial(answer[:end], held=True)["content"]), end


def test_a_held_response_goes_out_as_the_answers_content():
    from jobs.engine.toolcalls import ToolCalls

    sent, calls = [], []
    answer = ToolCalls(7, {"generic": True, "held": True}, sent.append, calls.append)
    written = '{"response": {"city": "Paris", "people": 3}}'
    for at in range(0, len(written), 5):
        answer.add(written[at:at + 5])
    content, made = answer.end()
    assert content == "".join(sent) == '{"city": "Paris", "people": 3}' and not made and not calls, (content, sent)
    jsonschema.validate(json_of(content), CITY)
