"""Log probabilities through /v1 with the official `openai` client: chat's logprobs with top_logprobs, streamed
and not, and completions' logprobs columns; each token's entry is the model's own distribution (greedy: the token
chosen is the likeliest), the likeliest others in order, and the tokens spell the answer."""

import math

import openai
import pytest

from tests.jobs.api.conftest import client_for

pytestmark = pytest.mark.timeout(300)
ASK = [{"role": "user", "content": "Name three colours."}]


def test_chat_logprobs_are_the_models_own_and_spell_the_answer_streamed_or_not(on_the_head, web_server, bob):
    client, model = client_for(web_server, bob), on_the_head.model.name
    done = client.chat.completions.create(model=model, messages=ASK, max_tokens=12, temperature=0, logprobs=True,
                                          top_logprobs=3)
    entries = done.choices[0].logprobs.content
    assert len(entries) == done.usage.completion_tokens and "".join(e.token for e in entries) == \
        done.choices[0].message.content
    for entry in entries:
        tops = [t.logprob for t in entry.top_logprobs]
        assert len(tops) == 3 and tops == sorted(tops, reverse=True) and entry.logprob <= 0
        assert entry.top_logprobs[0].token == entry.token, "greedy: the likeliest token was chosen"
        assert sum(math.exp(t) for t in tops) <= 1.0 + 1e-6

    streamed = []
    for chunk in client.chat.completions.create(model=model, messages=ASK, max_tokens=12, temperature=0,
                                                logprobs=True, top_logprobs=3, stream=True):
        if chunk.choices and chunk.choices[0].logprobs:
            streamed += chunk.choices[0].logprobs.content
    assert [(e.token, round(e.logprob, 4)) for e in streamed] == [(e.token, round(e.logprob, 4)) for e in entries]

    plain = client.chat.completions.create(model=model, messages=ASK, max_tokens=4, temperature=0)
    assert plain.choices[0].logprobs is None


def test_completions_logprobs_come_as_columns(on_the_head, web_server, bob):
    done = client_for(web_server, bob).completions.create(model=on_the_head.model.name, prompt="The sky is",
                                                          max_tokens=6, temperature=0, logprobs=2)
    found = done.choices[0].logprobs
    assert "".join(found.tokens) == done.choices[0].text and len(found.token_logprobs) == len(found.tokens)
    assert all(len(top) <= 2 for top in found.top_logprobs) and found.text_offset[0] == 0


@pytest.mark.parametrize(("fields", "param"), [({"top_logprobs": 3}, "top_logprobs"),
                                                ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
                                                ({"logprobs": "yes"}, "logprobs")])
def test_bad_logprobs_are_refused_naming_the_field(ready, web_server, bob, fields, param):
    with pytest.raises(openai.BadRequestError) as refused:
        client_for(web_server, bob).chat.completions.create(model="tiny", messages=ASK, **fields)
    assert refused.value.body["param"] == param, refused.value.body
