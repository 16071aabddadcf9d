"""Tool calling through /v1 with the official `openai` client, unchanged, on the real web server with the bundled
model on the head: each tool_choice, a streamed call reassembled from its deltas, and the next turn a tool-using
client sends (the assistant's calls with content null, then the tool's result). The bundled model's template has
no tools of its own: llama.cpp's chat layer offers them in the prompt and holds a call to its schema. Tools that
cannot be offered are refused in words, naming the field, with nothing queued."""

import json

import jsonschema
import openai
import pytest

from jobs.models import Job, JobStatus
from tests.jobs.api.conftest import client_for

pytestmark = pytest.mark.timeout(300)
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather now in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 40},
                                                    "unit": {"enum": ["celsius", "fahrenheit"]}},
                   "required": ["city", "unit"], "additionalProperties": False}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "The time now in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 40}},
                   "required": ["city"], "additionalProperties": False}}}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def ask(client, model: str, **fields):
    return client.chat.completions.create(model=model, messages=fields.pop("messages", ASK), max_tokens=200,
                                          temperature=0, tools=[WEATHER, TIME], **fields)


def valid_call(call, function: dict) -> dict:
    arguments = json.loads(call.function.arguments)
    jsonschema.validate(arguments, function["function"]["parameters"])
    return arguments


def test_a_named_function_and_required_each_give_a_call_whose_arguments_validate(on_the_head, web_server, bob):
    client, model = client_for(web_server, bob), on_the_head.model.name
    named = ask(client, model, tool_choice={"type": "function", "function": {"name": "get_time"}})
    choice = named.choices[0]
    assert choice.finish_reason == "tool_calls" and [c.function.name for c in choice.message.tool_calls] == [
        "get_time"], choice
    valid_call(choice.message.tool_calls[0], TIME)
    assert choice.message.tool_calls[0].id and choice.message.tool_calls[0].type == "function"

    required = ask(client, model, tool_choice="required").choices[0]
    assert required.finish_reason == "tool_calls" and required.message.tool_calls, required
    for call in required.message.tool_calls:
        valid_call(call, WEATHER if call.function.name == "get_weather" else TIME)
    stored = Job.objects.order_by("pk").last()
    assert stored.tool_calls[0]["function"]["name"] == required.message.tool_calls[0].function.name


def test_none_answers_in_words_and_auto_answers_well_formed(on_the_head, web_server, bob):
    client, model = client_for(web_server, bob), on_the_head.model.name
    plain = ask(client, model, tool_choice="none").choices[0]
    assert plain.message.content and not plain.message.tool_calls and plain.finish_reason in ("stop", "length")
    answer = ask(client, model, tool_choice="auto")
    auto = answer.choices[0]
    assert auto.message.content or auto.message.tool_calls, auto
    cut = auto.finish_reason == "length" and answer.usage.completion_tokens == 200  # calls as far as they came
    for call in auto.message.tool_calls or []:
        if not cut:
            valid_call(call, WEATHER if call.function.name == "get_weather" else TIME)
    assert auto.finish_reason == "tool_calls" or cut or not auto.message.tool_calls, auto


def test_a_streamed_call_reassembles_to_the_whole_one(on_the_head, web_server, bob):
    client, model = client_for(web_server, bob), on_the_head.model.name
    choice = {"type": "function", "function": {"name": "get_weather"}}
    whole = ask(client, model, tool_choice=choice).choices[0].message.tool_calls[0]
    calls, reasons, pieces, running_then = {}, [], 0, None
    for chunk in ask(client, model, tool_choice=choice, stream=True):
        for delta in chunk.choices[0].delta.tool_calls or [] if chunk.choices else []:
            if running_then is None:  # the call streams as it is written, not once the answer has ended
                running_then = Job.objects.latest("pk").status == JobStatus.RUNNING
            pieces += bool(delta.function and delta.function.arguments)
            call = calls.setdefault(delta.index, {"id": None, "name": "", "arguments": ""})
            call["id"] = delta.id or call["id"]
            call["name"] += (delta.function.name or "") if delta.function else ""
            call["arguments"] += (delta.function.arguments or "") if delta.function else ""
        reasons += [chunk.choices[0].finish_reason] if chunk.choices else []
    assert reasons[-1] == "tool_calls" and list(calls) == [0], (reasons, calls)
    assert calls[0]["name"] == "get_weather" and calls[0]["id"]
    assert json.loads(calls[0]["arguments"]) == json.loads(whole.function.arguments), "greedy: the same call"
    assert running_then and pieces > 1, "the first piece came while the job ran, and the arguments in pieces"


def test_the_next_turn_of_a_tool_using_client_is_answered(on_the_head, web_server, bob):
    client, model = client_for(web_server, bob), on_the_head.model.name
    first = ask(client, model, tool_choice={"type": "function", "function": {"name": "get_weather"}})
    call = first.choices[0].message.tool_calls[0]
    history = [*ASK, {"role": "assistant", "content": None, "tool_calls": [
        {"id": call.id, "type": "function", "function": {"name": call.function.name,
                                                         "arguments": call.function.arguments}}]},
               {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature": 21, "sky": "clear"})}]
    second = ask(client, model, messages=history, tool_choice="none").choices[0]
    assert second.message.content and not second.message.tool_calls, second
    assert Job.objects.order_by("pk").last().messages[1]["tool_calls"][0]["id"] == call.id


BAD = {
    "tools is not a list": ({"tools": {"name": "x"}}, "tools"),
    "a function without a name": ({"tools": [{"type": "function", "function": {}}]}, "tools[0].function.name"),
    "a name given twice": ({"tools": [WEATHER, WEATHER]}, "tools[1].function.name"),
    "parameters a grammar cannot hold": ({"tools": [{"type": "function", "function": {
        "name": "f", "parameters": {"type": "object", "properties": {"n": {"type": "number", "minimum": 0}}}}}]},
        "tools[0].function.parameters"),
    "a choice naming no tool": ({"tools": [WEATHER], "tool_choice": {"type": "function",
                                                                    "function": {"name": "nope"}}}, "tool_choice"),
    "required without tools": ({"tool_choice": "required"}, "tool_choice"),
    "a tool message without its call's id": ({"messages": [*ASK, {"role": "tool", "content": "21"}]},
                                             "messages[1].tool_call_id"),
}


@pytest.mark.parametrize("what", list(BAD))
def test_tools_that_cannot_be_offered_are_refused_in_words_with_nothing_queued(ready, web_server, bob, what):
    fields, param = BAD[what]
    with pytest.raises(openai.BadRequestError) as refused:
        client_for(web_server, bob).chat.completions.create(**{"model": "tiny", "messages": ASK, **fields})
    assert refused.value.body["param"] == param, refused.value.body
    assert not Job.objects.exists()
