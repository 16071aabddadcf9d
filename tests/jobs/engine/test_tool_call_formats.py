"""Each family's way of writing a tool call, through the panel's door to llama.cpp's chat layer
(models_app/llamacpp/chat.py): the model's own template (copied in chat_templates/) renders the offered tool into
the prompt and says how a call begins; the text a model of that family writes when it calls is read back as the
call, with its name and its arguments; a plain answer stays words. No model is loaded: these are the templates
and parsers alone, as llama-server uses them."""

import json
from pathlib import Path

import pytest

from models_app.llamacpp import chat

TEMPLATES = Path(__file__).parent / "chat_templates"
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather now in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
FORMATS = {  # template: a call as a model of that family writes it
    "Qwen-Qwen2.5-7B-Instruct": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
    "mistralai-Mistral-Nemo-Instruct-2407":
        '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "a1b2c3d4e"}]',
    "meta-llama-Llama-3.1-8B-Instruct": '{"name": "get_weather", "parameters": {"city": "Paris"}}',
    "google-gemma-4-31B-it": '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|>',
    "meetkai-functionary-medium-v3.1": '<function=get_weather>{"city": "Paris"}</function>',
}


@pytest.fixture(scope="module", params=list(FORMATS))
def family(request):
    templates = chat.Templates(None, (TEMPLATES / f"{request.param}.jinja").read_text())
    yield request.param, templates
    templates.close()


def test_the_template_shows_the_tool_and_its_call_is_read_back_with_its_arguments(family):
    name, templates = family
    assert templates.caps()["supports_tool_calls"], f"{name}'s template takes tools"
    rendered = templates.apply({"messages": ASK, "tools": [WEATHER], "tool_choice": "auto"})
    assert "get_weather" in rendered["prompt"], name
    syntax = {key: rendered[key] for key in ("format", "parser", "generation_prompt")}
    found = chat.parse(FORMATS[name], syntax)
    assert [call["name"] for call in found["tool_calls"]] == ["get_weather"], (name, found)
    assert json.loads(found["tool_calls"][0]["arguments"]) == {"city": "Paris"}
    assert chat.parse("It is sunny in Paris.", syntax) == {"content": "It is sunny in Paris.",
                                                             "reasoning_content": "", "tool_calls": []}


def test_a_required_call_is_held_to_the_grammar_from_the_first_token(family):
    name, templates = family
    rendered = templates.apply({"messages": ASK, "tools": [WEATHER], "tool_choice": "required"})
    assert rendered["grammar"] and not rendered["grammar_lazy"], name
    assert chat.grammar_parses(rendered["grammar"])


def test_a_partial_call_is_read_as_far_as_it_goes(family):
    name, templates = family
    rendered = templates.apply({"messages": ASK, "tools": [WEATHER], "tool_choice": "auto"})
    syntax = {key: rendered[key] for key in ("format", "parser", "generation_prompt")}
    whole = FORMATS[name]
    cut = whole[:whole.index("Paris") + 3]
    found = chat.parse(cut, syntax, partial=True)
    assert not found["content"].strip() or found["content"] in whole, (name, found)
    if found["tool_calls"]:
        assert found["tool_calls"][0]["name"] == "get_weather"
