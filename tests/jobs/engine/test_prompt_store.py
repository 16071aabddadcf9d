"""Prompts kept in the head's memory after their sequence went to other jobs: the same prompt (a conversation's
next turn) comes back without being read again, and answers as it did (run on the head)."""

import ctypes

import pytest

from jobs.engine.loaded_model import Engine
from jobs.engine.promptstore import PromptStore, Saved
from tests.jobs.conftest import head_engine

pytestmark = pytest.mark.timeout(300)
TOPIC = "Summarise this: " + " ".join(f"The lighthouse keeper counted {n} ships that night." for n in range(12))


@pytest.fixture(scope="module")
def engine() -> Engine:
    return head_engine(1024, slots=2)


def fresh(engine: Engine, capacity: int) -> None:
    for seq in engine.batcher.busy:
        engine.batcher.cancel(seq)
    engine.batcher.forget_all()
    engine.batcher.store = PromptStore(capacity)


def answer(engine: Engine, key: int, text: str, tokens: int = 8):
    prompt, stops = engine.chat_prompt([{"role": "user", "content": text}])
    params = {"temperature": 0.0, "top_p": 1.0, "top_k": 40, "repeat_penalty": 1.0, "max_tokens": tokens, "stop": []}
    outcome = engine.batcher.add(engine.work(key, prompt, params, lambda piece: None, stops))
    while engine.batcher.busy:
        engine.batcher.step()
    return outcome, prompt


def others_take_every_sequence(engine: Engine) -> None:
    prompts = [engine.chat_prompt([{"role": "user", "content": f"Name a colour ({n}). {TOPIC[::-1]}"}])[0]
               for n in range(2)]
    params = {"temperature": 0.0, "top_p": 1.0, "top_k": 40, "repeat_penalty": 1.0, "max_tokens": 2, "stop": []}
    for key, prompt in enumerate(prompts, start=100):
        engine.batcher.add(engine.work(key, prompt, params, lambda piece: None, []))
    while engine.batcher.busy:
        engine.batcher.step()


def test_a_prompt_whose_sequence_others_took_comes_back_from_the_store_and_answers_the_same(engine):
    fresh(engine, 64 * 2**20)
    first, prompt = answer(engine, 1, TOPIC)
    others_take_every_sequence(engine)
    assert not any(seq.cached[:len(prompt)] == prompt for seq in engine.batcher.sequences), "no sequence holds it"
    assert engine.batcher.store.saves >= 1 and engine.batcher.store.size > 0
    again, _ = answer(engine, 2, TOPIC)
    assert engine.batcher.store.restores == 1
    assert again.reused_tokens == len(prompt) - 1, "all but the last prompt token came back"
    assert again.text == first.text and first.text, "the same greedy answer"


def test_without_a_store_the_prompt_is_read_again_and_answers_the_same(engine):
    fresh(engine, 0)
    first, _ = answer(engine, 1, TOPIC)
    others_take_every_sequence(engine)
    again, _ = answer(engine, 2, TOPIC)
    assert engine.batcher.store.saves == engine.batcher.store.restores == 0
    assert again.reused_tokens < 40, "only what the others' prompts share with it (the chat preamble)"
    assert again.text == first.text


def test_past_its_capacity_the_store_forgets_the_least_recently_used(engine):
    fresh(engine, 64 * 2**20)
    answer(engine, 1, TOPIC)
    others_take_every_sequence(engine)
    one = engine.batcher.store.saved[0]
    engine.batcher.store.capacity = len(one.state) + 1  # room for about one
    answer(engine, 2, "Write about harbours. " + TOPIC[:len(TOPIC) // 2])  # about half its size
    others_take_every_sequence(engine)
    assert engine.batcher.store.size <= engine.batcher.store.capacity
    assert [entry.tokens[:40] for entry in engine.batcher.store.saved] != [one.tokens[:40]], "a newer one came"
    assert one not in engine.batcher.store.saved, "the older one went to make room"


def test_it_saves_and_writes_back_only_where_that_costs_less_than_reading_again():
    store = PromptStore(2**20)
    assert store.worth_saving(200, 3.2) and store.worth_saving(200, None), "nothing measured yet: it tries"
    store.per_token = 0.0001  # the head: a token's keys and values copied in memory
    assert store.worth_saving(200, 200 * 0.016)
    store.per_token = 0.007  # over laptops, values read a row at a time: 193 tokens in 1.4 s
    assert not store.worth_saving(200, 200 * 0.016), "saved and written back it would cost most of a read"
    entry = Saved(list(range(1300)), [], (ctypes.c_uint8 * 1)())
    assert store.worth_restoring(entry, 1270 * 0.016), "a long conversation: 9 s written back against 20 s read"
    assert not store.worth_restoring(entry, 33 * 0.016), "all of it written back to spare 33 tokens"
