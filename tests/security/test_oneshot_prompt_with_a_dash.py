"""A prompt that begins with "-" reaches the one-shot llama.cpp run as its prompt, never as an option."""

from models_app.llamacpp import oneshot


def test_it_takes_a_prompt_that_looks_like_an_option_as_the_prompt():
    answer = oneshot.complete([], "-h", max_tokens=2)
    assert answer["text"] and answer["prompt_tokens"] >= 1, answer
