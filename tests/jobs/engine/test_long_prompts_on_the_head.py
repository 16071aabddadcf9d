"""Prompts longer than one decode step (512 tokens) on the batching engine, run on the head: read whole, alone,
they give single-process llama-cpp-python's greedy answer; a sequence that held a longer conversation and now
keeps only its system prompt reads the rest in several steps and answers as if read afresh."""

import pytest

from jobs.engine.loaded_model import Engine
from jobs.engine.sequences import STEP_TOKENS
from models_app.library.bundled import bundled_model_path
from models_app.llamacpp import cpucheck
from tests.jobs.conftest import head_engine

pytestmark = pytest.mark.timeout(300)
GREEDY = {"temperature": 0.0, "top_p": 1.0, "top_k": 40, "repeat_penalty": 1.0, "max_tokens": 24, "stop": []}
STORY = "The keeper climbed the tower, trimmed the wick and watched the ships pass the rocks. "
HARBOUR = "In the harbour the fishermen mended their nets and told stories of storms long past. "


@pytest.fixture(scope="module")
def engine() -> Engine:
    return head_engine(2048, slots=2)


def answer(engine: Engine, prompt: list[int], stops: list[str], reuse: bool = False):
    outcome = engine.batcher.add(engine.work(1, prompt, GREEDY, lambda text: None, stops, reuse=reuse))
    while engine.batcher.busy:
        engine.batcher.step()
    return outcome


def chat(engine: Engine, text: str) -> tuple[list[int], list[str]]:
    return engine.chat_prompt([{"role": "system", "content": "You are a patient lighthouse expert."},
                               {"role": "user", "content": text}])


def test_a_prompt_of_several_steps_read_alone_equals_llama_cpp_python(engine):
    from llama_cpp import Llama

    prompt, stops = chat(engine, STORY * 60 + "What did the keeper trim? Answer in one sentence.")
    assert len(prompt) > 2 * STEP_TOKENS
    ours = answer(engine, prompt, stops)
    with cpucheck.loading():  # as the engine loads it
        reference = Llama(model_path=str(bundled_model_path()), n_ctx=2048, verbose=False)
    theirs = reference.create_completion(prompt, max_tokens=24, temperature=0.0, top_p=1.0, top_k=40,
                                         repeat_penalty=1.0, stop=stops or None)
    assert ours.completion_tokens, "it answered"
    assert ours.text == theirs["choices"][0]["text"]


def test_a_sequence_cut_back_to_a_short_prefix_reads_a_long_rest_in_steps(engine):
    engine.batcher.forget_all()
    answer(engine, *chat(engine, STORY * 8 + "Tell me more."), reuse=True)  # cut back: its length does not matter
    second, stops = chat(engine, HARBOUR * 60 + "What did the fishermen mend? Answer in one sentence.")
    again = answer(engine, second, stops, reuse=True)
    assert 0 < again.reused_tokens < len(second) - 2 * STEP_TOKENS, "the rest needed several steps"
    engine.batcher.forget_all()
    afresh = answer(engine, second, stops)
    assert again.completion_tokens and again.text == afresh.text
