"""Anthropic's Messages API at /v1/messages with the official `anthropic` client, unchanged (base_url at the panel,
a panel token as its API key): a message, a streamed one read through the client's own event handling, a tool_use
round trip (the call, then its tool_result and the answer), count_tokens (the engine's own count, and an estimate
for a model whose file is not there), max_tokens as a ceiling; and errors in Anthropic's shape."""

import anthropic
import pytest

from clusterpanel.accounts.models import ApiToken
from jobs.models import Job

pytestmark = pytest.mark.timeout(300)
WEATHER = {"name": "get_weather", "description": "The weather now in a city.",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 40}},
                            "required": ["city"], "additionalProperties": False}}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
GREEDY = {"temperature": 0}  # this SDK no longer sends temperature itself; the API still takes it


def client_for(web_server: str, user) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=web_server, api_key=ApiToken.issue(user, "claude")[1], max_retries=0)


def test_a_message_and_a_streamed_one_say_the_same(on_the_head, web_server, bob):
    client, model = client_for(web_server, bob), on_the_head.model.name
    message = client.messages.create(model=model, max_tokens=16, system="Be brief.", extra_body=GREEDY,
                                     messages=[{"role": "user", "content": "Name three colours."}])
    assert message.type == "message" and message.role == "assistant" and message.content[0].type == "text"
    assert message.stop_reason in ("end_turn", "max_tokens") and message.usage.output_tokens > 0
    with client.messages.stream(model=model, max_tokens=16, system="Be brief.", extra_body=GREEDY,
                                messages=[{"role": "user", "content": "Name three colours."}]) as stream:
        pieces = list(stream.text_stream)
        final = stream.get_final_message()
    assert "".join(pieces) == message.content[0].text == final.content[0].text, "greedy: the same answer"
    assert final.stop_reason == message.stop_reason and final.usage.output_tokens == message.usage.output_tokens

    with client.messages.stream(model=model, max_tokens=32000, messages=[{"role": "user", "content": "Hi."}]) as roomy:
        assert roomy.get_final_message().content, "max_tokens is a ceiling, as Claude Code sends it: cut, not refused"
    assert Job.objects.latest("pk").params["max_tokens"] == on_the_head.ctx


def test_a_tool_use_round_trip(on_the_head, web_server, bob):
    client, model = client_for(web_server, bob), on_the_head.model.name
    first = client.messages.create(model=model, max_tokens=200, extra_body=GREEDY, messages=ASK, tools=[WEATHER],
                                   tool_choice={"type": "tool", "name": "get_weather"})
    (use,) = [block for block in first.content if block.type == "tool_use"]
    assert first.stop_reason == "tool_use" and use.name == "get_weather" and isinstance(use.input["city"], str)
    with client.messages.stream(model=model, max_tokens=200, extra_body=GREEDY, messages=ASK, tools=[WEATHER],
                                tool_choice={"type": "tool", "name": "get_weather"}) as stream:
        streamed = stream.get_final_message()
    assert [b.input for b in streamed.content if b.type == "tool_use"] == [use.input], "streamed: the same call"
    second = client.messages.create(model=model, max_tokens=40, extra_body=GREEDY, tools=[WEATHER], messages=[
        *ASK, {"role": "assistant", "content": [{"type": "tool_use", "id": use.id, "name": use.name,
                                                 "input": use.input}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "21 C, clear"}]}],
        tool_choice={"type": "none"})
    assert second.content[0].type == "text" and second.content[0].text and second.stop_reason != "tool_use"
    assert Job.objects.order_by("pk").last().messages[-1] == {"role": "tool", "tool_call_id": use.id,
                                                               "content": "21 C, clear"}


def test_count_tokens_counts_what_the_engine_reads(on_the_head, web_server, bob):
    client, model = client_for(web_server, bob), on_the_head.model.name
    for tools in ({}, {"tools": [WEATHER], "tool_choice": {"type": "tool", "name": "get_weather"}}):
        counted = client.messages.count_tokens(model=model, system="Be brief.", messages=ASK, **tools).input_tokens
        sent = client.messages.create(model=model, max_tokens=4, system="Be brief.", messages=ASK, **tools)
        assert counted == sent.usage.input_tokens, (tools, counted, sent.usage)


def test_count_tokens_and_errors_in_anthropics_shape(ready, web_server, bob):
    client = client_for(web_server, bob)
    assert client.messages.count_tokens(model="tiny", messages=ASK).input_tokens > 0
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.messages.create(model="tiny", max_tokens=8, messages=[
            {"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": "http://x/y.png"}}]}])
    assert refused.value.body["type"] == "error" and "image" in refused.value.body["error"]["message"]
    with pytest.raises(anthropic.AuthenticationError):
        anthropic.Anthropic(base_url=web_server, api_key="cp_wrong", max_retries=0).messages.create(
            model="tiny", max_tokens=8, messages=ASK)
    assert not Job.objects.exists()
