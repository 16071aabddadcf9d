"""Ollama's API at /ollama/ with the official `ollama` client, unchanged (its host http://<panel>/ollama, a panel
token as a bearer header): chat whole and streamed (NDJSON), generate, a tool call, tags, show, ps and version;
and errors in Ollama's shape."""

import json

import ollama
import pytest
import requests

from clusterpanel.accounts.models import ApiToken
from jobs.models import Job

pytestmark = pytest.mark.timeout(300)
ASK = [{"role": "user", "content": "Name three colours."}]
GREEDY = {"temperature": 0, "num_predict": 16}


def client_for(web_server: str, user) -> ollama.Client:
    return ollama.Client(host=f"{web_server}/ollama",
                         headers={"Authorization": f"Bearer {ApiToken.issue(user, 'ollama')[1]}"})


def test_chat_whole_and_streamed_and_generate(on_the_head, web_server, bob):
    client, model = client_for(web_server, bob), on_the_head.model.name
    whole = client.chat(model=model, messages=ASK, options=GREEDY, stream=False)
    assert whole.done and whole.message.role == "assistant" and whole.message.content
    assert whole.done_reason in ("stop", "length") and whole.eval_count > 0 and whole.prompt_eval_count > 0
    parts = list(client.chat(model=model, messages=ASK, options=GREEDY, stream=True))
    assert parts[-1].done and not any(part.done for part in parts[:-1])
    assert "".join(part.message.content for part in parts) == whole.message.content, "greedy: the same answer"
    made = client.generate(model=model, prompt="Name three colours.", options=GREEDY, stream=False)
    assert made.done and made.response == whole.message.content, "generate: the prompt in the chat template"


def test_a_tool_call_and_json_format(on_the_head, web_server, bob):
    client, model = client_for(web_server, bob), on_the_head.model.name
    weather = {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.",
                                                "parameters": {"type": "object", "properties": {
                                                    "city": {"type": "string", "maxLength": 40}},
                                                    "required": ["city"]}}}
    asked = client.chat(model=model, messages=[{"role": "user", "content": "Weather in Paris?"}], tools=[weather],
                        options={"temperature": 0, "num_predict": 200}, stream=False)
    for call in asked.message.tool_calls or []:
        assert call.function.name == "get_weather" and isinstance(call.function.arguments["city"], str)
    answered = client.chat(model=model, messages=[{"role": "user", "content": 'Answer in JSON: {"name": "<you>"}'}],
                           format="json", options={"temperature": 0, "num_predict": 200}, stream=False)
    assert isinstance(json.loads(answered.message.content), dict)


def test_tags_show_ps_version_and_errors(on_the_head, web_server, bob):
    client, model = client_for(web_server, bob), on_the_head.model.name
    assert model in [listed.model for listed in client.list().models]
    assert client.show(model).details.format == "gguf"
    assert model in [loaded.model for loaded in client.ps().models]
    assert requests.get(f"{web_server}/ollama/api/version", timeout=30).json()["version"]
    assert requests.get(f"{web_server}/ollama/", timeout=30).text == "Ollama is running"
    with pytest.raises(ollama.ResponseError) as refused:
        client.chat(model=model, messages=[{"role": "user", "content": "Hi", "images": ["aGk="]}], stream=False)
    assert refused.value.status_code == 400 and "images" in refused.value.error
    with pytest.raises(ollama.ResponseError) as unknown:
        ollama.Client(host=f"{web_server}/ollama").chat(model=model, messages=ASK, stream=False)
    assert unknown.value.status_code == 401
    assert Job.objects.count() == 0
