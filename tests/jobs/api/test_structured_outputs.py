"""Structured outputs through /v1 with the official `openai` client, unchanged: `parse` with a nested pydantic
model, json_object, a streamed json_schema answer and a completion held to a schema, on the real web server with
the bundled model on the head (the engine's loop runs in this process). Schemas that cannot be held to, hostile
ones among them, are refused in words naming response_format before anything is queued, and the web process
goes on serving."""

import json

import jsonschema
import openai
import pytest
import requests
from pydantic import BaseModel, Field

from clusterpanel.accounts.models import ApiToken
from jobs.models import Job
from tests.jobs.api.conftest import client_for

pytestmark = pytest.mark.timeout(300)


class Address(BaseModel):
    city: str = Field(max_length=30)
    country: str = Field(max_length=30)


class Person(BaseModel):
    name: str = Field(max_length=30)
    age: int
    address: Address
    hobbies: list[str] = Field(max_length=3)


def test_parse_fills_a_nested_pydantic_model(on_the_head, web_server, bob):
    done = client_for(web_server, bob).chat.completions.parse(
        model=on_the_head.model.name, messages=[{"role": "user", "content": "Describe a person who lives in Paris."}],
        response_format=Person, max_tokens=300, temperature=0)
    person = done.choices[0].message.parsed
    assert done.choices[0].finish_reason == "stop" and isinstance(person, Person), done
    assert isinstance(person.address, Address) and len(person.hobbies) <= 3


def test_json_object_gives_one_json_object(on_the_head, web_server, bob):
    done = client_for(web_server, bob).chat.completions.create(
        model=on_the_head.model.name,
        messages=[{"role": "user", "content": 'Answer in JSON: {"name": "<your name>"}.'}],
        response_format={"type": "json_object"}, max_tokens=300, temperature=0)
    assert done.choices[0].finish_reason == "stop"
    assert isinstance(json.loads(done.choices[0].message.content), dict), done.choices[0].message.content


def test_a_streamed_answer_and_a_completion_are_held_to_their_schemas(on_the_head, web_server, bob):
    schema = {"type": "object", "properties": {"colour": {"enum": ["red", "green", "blue"]},
                                               "shades": {"type": "array", "items": {"type": "string",
                                                                                     "maxLength": 12},
                                                          "maxItems": 2}},
              "required": ["colour", "shades"], "additionalProperties": False}
    wanted = {"type": "json_schema", "json_schema": {"name": "colour", "schema": schema, "strict": True}}
    client = client_for(web_server, bob)
    chunks = list(client.chat.completions.create(
        model=on_the_head.model.name, messages=[{"role": "user", "content": "Pick a colour."}], response_format=wanted,
        max_tokens=200, temperature=0.8, seed=7, stream=True))
    text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    assert chunks[-1].choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(text), schema)

    completion = client.completions.create(model=on_the_head.model.name, prompt="A colour and its shades:",
                                           max_tokens=200, temperature=0, extra_body={"response_format": wanted})
    jsonschema.validate(json.loads(completion.choices[0].text), schema)


HOSTILE = {
    "a schema that is not an object": {"type": "json_schema", "json_schema": {"name": "x", "schema": [1, 2]}},
    "an unknown type": {"type": "xml"},
    "nesting 100 deep": {"type": "json_schema", "json_schema": {"name": "x", "schema": json.loads(
        '{"type": "array", "items": ' * 100 + '{"type": "string"}' + "}" * 100)}},
    "an enum of 100,000 values": {"type": "json_schema", "json_schema": {"name": "x", "schema": {
        "enum": [f"value {n}" for n in range(100_000)]}}},
    "a recursive $ref": {"type": "json_schema", "json_schema": {"name": "x", "schema": {
        "$defs": {"loop": {"$ref": "#/$defs/loop"}}, "$ref": "#/$defs/loop"}}},
    "a pattern with a lookahead": {"type": "json_schema", "json_schema": {"name": "x", "schema": {
        "type": "string", "pattern": "^(?=a)b$"}}},
    "a length past the grammar's repetitions": {"type": "json_schema", "json_schema": {"name": "x", "schema": {
        "type": "string", "maxLength": 1_000_000}}},
}


@pytest.mark.parametrize("what", list(HOSTILE))
def test_a_schema_that_cannot_be_held_to_is_refused_in_words_with_nothing_queued(ready, web_server, bob, what):
    client = client_for(web_server, bob)
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "Hi"}],
                                       response_format=HOSTILE[what], max_tokens=8)
    error = refused.value.body
    assert error["param"].startswith("response_format") and "response_format" in error["message"], error
    assert not Job.objects.exists(), "nothing was queued"
    assert client.models.list().data, "the web process goes on serving"


def test_a_body_nested_past_what_the_panel_reads_is_refused_in_words(ready, web_server, bob):
    deep = '{"type": "array", "items": ' * 10_000 + "{}" + "}" * 10_000
    body = '{"model": "tiny", "messages": [{"role": "user", "content": "Hi"}], "response_format": ' \
        '{"type": "json_schema", "json_schema": {"name": "x", "schema": ' + deep + "}}}"
    answer = requests.post(f"{web_server}/v1/chat/completions", data=body, timeout=60,
                           headers={"Authorization": f"Bearer {ApiToken.issue(bob, 'deep')[1]}",
                                    "Content-Type": "application/json"})
    assert answer.status_code == 400 and "nests deeper" in answer.json()["error"]["message"], answer.text
    assert not Job.objects.exists()
