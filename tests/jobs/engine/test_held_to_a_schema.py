"""Answers held to a JSON schema by a grammar (jobs/structured.py, the sequence's sampler chain): the bundled model
on the head, loaded once. A fuzz of schemas: each is refused in words before anything runs, or its answer ends
by itself and validates; and of tool lists: a required (or named) call always comes back, one call whose
arguments validate against its function's schema. And the same-answer promise holds with a grammar: a greedy
answer held to a schema is the same alone and beside three others."""

import json

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs import structured
from jobs.params import ParamError
from tests.jobs.conftest import head_engine

pytestmark = pytest.mark.timeout(600)
GREEDY = {"temperature": 0.0, "top_p": 1.0, "top_k": 40, "repeat_penalty": 1.0, "stop": []}
NAMES = st.sampled_from(["name", "city", "count", "colour", "size", "id", "tags", "ok", "note"])


def leaf() -> st.SearchStrategy:
    return st.one_of(
        st.builds(lambda n: {"type": "string", "maxLength": n}, st.integers(1, 12)),
        st.just({"type": "integer"}),
        st.just({"type": "number"}),
        st.just({"type": "boolean"}),
        st.builds(lambda values: {"enum": values}, st.lists(st.sampled_from(["red", "blue", 3, None, True]),
                                                          min_size=1, max_size=4, unique_by=json.dumps)),
        st.builds(lambda p: {"type": "string", "pattern": p}, st.sampled_from(["^[a-z]{1,6}$", "^[0-9]{3}$"])),
        st.sampled_from([{"type": "string", "format": "date"}, {"type": "null"}]),
    )


def objects(children: st.SearchStrategy) -> st.SearchStrategy:
    def build(properties: dict, required: list[str]) -> dict:
        return {"type": "object", "properties": properties, "required": [k for k in required if k in properties],
                "additionalProperties": False}
    return st.builds(build, st.dictionaries(NAMES, children, min_size=1, max_size=3), st.lists(NAMES, max_size=3))


def arrays(children: st.SearchStrategy) -> st.SearchStrategy:
    return st.builds(lambda item, most: {"type": "array", "items": item, "maxItems": most}, children,
                     st.integers(0, 3))


SCHEMAS = st.recursive(leaf(), lambda children: st.one_of(objects(children), arrays(children),
                                                           st.builds(lambda a, b: {"anyOf": [a, b]}, children,
                                                                     children)),
                       max_leaves=6)


@pytest.fixture(scope="module")
def engine():
    loaded = head_engine(ctx=1024, slots=4)
    yield loaded
    loaded.llm.close()


def held(schema: dict) -> dict:
    return structured.response_format({"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}})


def answer(engine, schema_format: dict, question: str = "Describe a small town as JSON.") -> tuple[str, str]:
    prompt, stops = engine.chat_prompt([{"role": "user", "content": question}])
    outcome = engine.run(prompt, {**GREEDY, "max_tokens": 300, "response_format": schema_format}, lambda text: None,
                         lambda: False, stops)
    return outcome.text, outcome.finish_reason


@settings(max_examples=16, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(schema=SCHEMAS)
def test_every_answer_to_a_schema_ends_by_itself_and_validates_or_the_schema_is_refused_in_words(engine, schema):
    try:
        checked = held(schema)
    except ParamError as exc:
        assert exc.param == "response_format" and "response_format" in str(exc), str(exc)
        return
    text, reason = answer(engine, checked)
    assert reason == "stop", f"{reason} after {text!r} for {schema}"
    jsonschema.validate(json.loads(text), schema)


def test_a_json_object_answer_is_one_object(engine):
    text, reason = answer(engine, structured.response_format({"type": "json_object"}),
                          'Answer in JSON: {"name": "<your name>"}.')
    assert reason == "stop" and isinstance(json.loads(text), dict), text


def test_a_greedy_answer_held_to_a_schema_is_the_same_alone_and_beside_others(engine):
    schema = held({"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                                    "people": {"type": "integer"}},
                   "required": ["city", "people"], "additionalProperties": False})
    alone, _ = answer(engine, schema, "Name a city and how many people live there.")
    batcher = engine.batcher
    questions = ["Name a city and how many people live there.", "Name a river.", "Count to five.", "Say hi."]
    outcomes = []
    for key, question in enumerate(questions):
        prompt, stops = engine.chat_prompt([{"role": "user", "content": question}])
        params = {**GREEDY, **({"max_tokens": 300, "response_format": schema} if key == 0 else {"max_tokens": 40})}
        outcomes.append(batcher.add(engine.work(key, prompt, params, lambda text: None, stops, reuse=False)))
    while batcher.busy:
        batcher.step()
    assert outcomes[0].text == alone and len([o for o in outcomes if o.text]) == 4, [o.text for o in outcomes]
    assert json.loads(alone)["city"]


TOOL_NAMES = st.sampled_from(["get_weather", "find_city", "add", "lookup", "send_mail"])


@settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(functions=st.lists(st.tuples(TOOL_NAMES, objects(leaf())), min_size=1, max_size=3,
                          unique_by=lambda tool: tool[0]),
       choice=st.sampled_from(["required", "named"]))
def test_a_required_call_always_comes_back_with_arguments_that_validate(engine, functions, choice):
    from jobs import tools
    from jobs.engine.toolcalls import ToolCalls

    offered = [{"type": "function", "function": {"name": name, "parameters": schema}} for name, schema in functions]
    try:
        checked = tools.tools(offered)
    except ParamError as exc:
        assert exc.param.startswith("tools") and "tools" in str(exc), str(exc)
        return
    wanted = {"name": functions[-1][0]} if choice == "named" else "required"
    params = {**GREEDY, "max_tokens": 300, "tools": json.dumps(checked), "tool_choice": wanted,
              "parallel_tool_calls": False}
    rendered = engine.tool_prompt([{"role": "user", "content": "Use a tool."}], params)
    reader = ToolCalls(1, rendered.syntax, lambda text: None, lambda delta: None)
    outcome = engine.run(rendered.tokens, params, reader.add, lambda: False, rendered.stops, rendered=rendered)
    _, calls = reader.end()
    assert outcome.finish_reason == "stop" and len(calls) == 1, (outcome.text, functions)
    schemas = dict(functions)
    assert choice != "named" or calls[0]["function"]["name"] == functions[-1][0]
    jsonschema.validate(json.loads(calls[0]["function"]["arguments"]), schemas[calls[0]["function"]["name"]])
