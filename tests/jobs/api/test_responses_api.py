"""OpenAI's Responses API with the official `openai` client, unchanged: responses.create whole and streamed (its
typed events read by the client), previous_response_id going on from an earlier answer, a function tool's call and
its output, GET /v1/responses/<id>; another person's response is not found."""

import json

import openai
import pytest

from clusterpanel.accounts.models import ApiToken
from jobs.models import Job
from tests.jobs.api.conftest import client_for

pytestmark = pytest.mark.timeout(300)
WEATHER = {"type": "function", "name": "get_weather", "description": "The weather now in a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 40}},
                          "required": ["city"], "additionalProperties": False}}


def test_a_response_whole_and_streamed_and_read_back(on_the_head, web_server, bob):
    client, model = client_for(web_server, bob), on_the_head.model.name
    made = client.responses.create(model=model, input="Name three colours.", instructions="Be brief.",
                                   max_output_tokens=16, temperature=0)
    assert made.status == "completed" and made.output_text and made.usage.output_tokens > 0
    with client.responses.stream(model=model, input="Name three colours.", instructions="Be brief.",
                                 max_output_tokens=16, temperature=0) as stream:
        deltas = [event.delta for event in stream if event.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == final.output_text == made.output_text, "greedy: the same answer"
    again = client.responses.retrieve(made.id)
    assert again.id == made.id and again.output_text == made.output_text and again.status == "completed"


def test_previous_response_id_goes_on_from_the_earlier_answer(on_the_head, web_server, bob):
    client, model = client_for(web_server, bob), on_the_head.model.name
    first = client.responses.create(model=model, input="My name is Ada.", max_output_tokens=12, temperature=0)
    second = client.responses.create(model=model, input="What is my name?", previous_response_id=first.id,
                                     max_output_tokens=12, temperature=0)
    asked = Job.objects.get(pk=int(second.id.removeprefix("resp_"))).messages
    assert [m["role"] for m in asked] == ["user", "assistant", "user"] and asked[0]["content"] == "My name is Ada."
    assert asked[1]["content"] == first.output_text
    stranger = ApiToken.issue(Job.objects.first().user.__class__.objects.create_user("eve", password="x" * 12),
                              "eve")[1]
    with pytest.raises(openai.NotFoundError):
        openai.OpenAI(base_url=f"{web_server}/v1", api_key=stranger, max_retries=0).responses.retrieve(first.id)


def test_a_function_tool_and_its_output(on_the_head, web_server, bob):
    client, model = client_for(web_server, bob), on_the_head.model.name
    asked = client.responses.create(model=model, input="What is the weather in Paris?", tools=[WEATHER],
                                    tool_choice={"type": "function", "name": "get_weather"}, max_output_tokens=200,
                                    temperature=0)
    (call,) = [item for item in asked.output if item.type == "function_call"]
    assert call.name == "get_weather" and isinstance(json.loads(call.arguments)["city"], str)
    among_others = client.responses.create(  # as Codex CLI sends them: a hosted tool, and functions in a namespace
        model=model, input="What is the weather in Paris?", max_output_tokens=200, temperature=0,
        tool_choice={"type": "function", "name": "get_weather"},
        tools=[{"type": "web_search"}, {"type": "namespace", "name": "weather", "description": "Weather tools.",
                                        "tools": [WEATHER]}])
    assert [item.name for item in among_others.output if item.type == "function_call"] == ["get_weather"]
    with client.responses.stream(model=model, input="What is the weather in Paris?", tools=[WEATHER],
                                 tool_choice={"type": "function", "name": "get_weather"}, max_output_tokens=200,
                                 temperature=0) as stream:
        streamed = stream.get_final_response()
    assert [(i.name, json.loads(i.arguments)) for i in streamed.output if i.type == "function_call"] == [
        (call.name, json.loads(call.arguments))]
    answered = client.responses.create(model=model, previous_response_id=asked.id, tools=[WEATHER],
                                       tool_choice="none", max_output_tokens=30, temperature=0, input=[
                                           {"type": "function_call_output", "call_id": call.call_id,
                                            "output": "21 C and clear"}])
    assert answered.output_text and not [i for i in answered.output if i.type == "function_call"]
