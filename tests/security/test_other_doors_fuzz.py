"""The doors that translate to /v1's, fuzzed as test_views_fuzz.py fuzzes /v1: Anthropic's /v1/messages, the
Responses API, Ollama's /ollama/api/chat, generate and embed, and /v1/embeddings, each body good, with one bad
field, or any bytes. Every answer is in its door's own shape and none is a server error; a valid body meets the
stopped Redis (503)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.security.test_views_fuzz import (
    EXAMPLES,
    HI,
    RAW_BODIES,
    TOOL,
    anonymous,
    body_of,
    encoded,
    never_a_server_error,
    openai_shape,
    post_json,
)

ANTHROPIC = {"model": "tiny", "max_tokens": 8, "messages": HI, "system": "Be brief.", "temperature": 0.5,
             "stop_sequences": ["\n"], "stream": False,
             "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}], "tool_choice": {"type": "auto"}}
RESPONSES = {"model": "tiny", "input": "Hi", "instructions": "Be brief.", "max_output_tokens": 8,
             "temperature": 0.5, "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
             "tool_choice": "auto", "previous_response_id": "resp_1", "stream": False}
EMBEDDINGS = {"model": "tiny", "input": ["Hi", "there"], "encoding_format": "float", "dimensions": 64}
OLLAMA = {"model": "tiny", "messages": HI, "stream": False, "options": {"temperature": 0.5, "num_predict": 8},
          "format": "json", "tools": [TOOL]}


def anthropic_shape(answer) -> None:
    if answer.status_code != 503:
        never_a_server_error(answer)
    if answer.status_code >= 400:
        found = answer.json()
        assert found["type"] == "error" and isinstance(found["error"]["message"], str), found


def ollama_shape(answer) -> None:
    if answer.status_code != 503:
        never_a_server_error(answer)
    if answer.status_code >= 400:
        assert isinstance(answer.json()["error"], str), answer.content[:300]


def raw_of(body) -> bytes:
    return body if isinstance(body, bytes) else encoded(body)


@EXAMPLES
@given(body=body_of(ANTHROPIC) | RAW_BODIES)
def test_it_answers_anthropic_messages_in_shape(no_redis, token, body):
    anthropic_shape(post_json(anonymous(), "/v1/messages", raw_of(body), **token))


@EXAMPLES
@given(body=body_of(RESPONSES) | RAW_BODIES)
def test_it_answers_responses_in_shape(no_redis, token, body):
    openai_shape(post_json(anonymous(), "/v1/responses", raw_of(body), **token))


@EXAMPLES
@given(body=body_of(OLLAMA) | RAW_BODIES, path=st.sampled_from(["/ollama/api/chat", "/ollama/api/generate"]))
def test_it_answers_ollama_in_shape(no_redis, token, body, path):
    if isinstance(body, dict) and path.endswith("generate"):
        body = {**{k: v for k, v in body.items() if k != "messages"}, "prompt": "Once"}
    ollama_shape(post_json(anonymous(), path, raw_of(body), **token))


@settings(EXAMPLES, max_examples=50)
@given(body=body_of(EMBEDDINGS) | RAW_BODIES, path=st.sampled_from(["/v1/embeddings", "/ollama/api/embed"]))
def test_it_answers_embeddings_in_shape(no_redis, token, body, path):
    shape = openai_shape if path.startswith("/v1/") else ollama_shape
    shape(post_json(anonymous(), path, raw_of(body), **token))
