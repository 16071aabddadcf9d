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
