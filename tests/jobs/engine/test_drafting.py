"""Speculative decoding by n-gram drafting (jobs/engine/drafting.py, sequences.py): the look-up that drafts, the
draft's length following what is kept; and on the bundled model, a copying answer made in fewer steps than
tokens, its cache holding exactly the tokens it kept, its limits (max_tokens, stop strings) kept to the token,
and the same answer each time, greedy or seeded; greedy, the answer without drafts (the built llama.cpp gives a
token the same numbers however many rows its step reads: test_one_row_as_many.py)."""

import pytest

from jobs.engine.drafting import DraftLength, NgramIndex
from jobs.engine.loaded_model import Engine
from jobs.engine.sequences import Batcher
from tests.jobs.conftest import head_engine

pytestmark = pytest.mark.timeout(300)
GREEDY = {"temperature": 0.0, "top_p": 1.0, "top_k": 40, "repeat_penalty": 1.0, "max_tokens": 48, "stop": []}
TEXT = ("The lighthouse at Cape Wrath was built in 1828 by Robert Stevenson. It stands on a cliff 120 metres above "
        "the sea, and its light can be seen for 22 nautical miles.")
COPY = f"Repeat this text exactly:\n\n{TEXT}"


def test_it_drafts_what_followed_the_longest_tail_seen_before():
    index = NgramIndex()
    index.add([1, 2, 3, 4, 5, 9, 9, 2, 3, 4])
    assert index.draft(3) == [5, 9, 9], "after 2 3 4 came 5 9 9"
    assert index.draft(0) == []
    index.add([7])
    assert index.draft(4) == [], "4 7 was never seen, nor 7 alone as an n-gram of two"
    index.add([2, 3])
    assert index.draft(2) == [4, 7], "the latest 2 3 before the tail was followed by 4 7"


def test_the_draft_grows_while_all_is_kept_and_shrinks_to_what_was():
    length = DraftLength(most=8)
    assert length.now == 2
    length.kept(2, 2)
    length.kept(4, 4)
    assert length.now == 6
    length.kept(6, 1)
    assert length.now == 2
    length.kept(0, 0)
    assert length.now == 2, "a step that drafted nothing says nothing"
    assert DraftLength(most=1).now == 1


@pytest.fixture(scope="module")
def engine() -> Engine:
    return head_engine(1024, slots=2)


def run(engine: Engine, batcher: Batcher, messages: list[dict], params: dict):
    prompt, stops = engine.chat_prompt(messages)
    batcher.forget_all()
    outcome = batcher.add(engine.work(1, prompt, params, lambda text: None, stops, reuse=False))
    (seq,) = batcher.busy
    while batcher.busy:
        batcher.step()
    return outcome, seq, prompt


def cache_ends_at(engine: Engine, batcher: Batcher, seq) -> int:
    return engine.batcher.api.llama_memory_seq_pos_max(batcher.memory, seq.seq_id) + 1


def test_a_copying_answer_takes_fewer_steps_than_tokens_and_its_cache_holds_what_it_kept(engine):
    drafting = Batcher(engine.llm, 2, draft_most=8, any_shape=engine.batcher.any_shape)
    outcome, seq, prompt = run(engine, drafting, [{"role": "user", "content": COPY}], GREEDY)
    assert outcome.completion_tokens >= 12 and outcome.drafted
    assert outcome.accepted / outcome.drafted > 0.5, (outcome.accepted, outcome.drafted)
    assert outcome.trips < outcome.completion_tokens * 0.7, (outcome.trips, outcome.completion_tokens)
    assert cache_ends_at(engine, drafting, seq) == len(seq.cached), "no drafted token it did not keep"
    assert seq.cached[:len(prompt)] == prompt
    again, _, _ = run(engine, drafting, [{"role": "user", "content": COPY}], GREEDY)
    assert again.text == outcome.text, "the same request, the same answer"
    plain, _, _ = run(engine, engine.batcher, [{"role": "user", "content": COPY}], GREEDY)
    assert plain.drafted == 0 and plain.text == outcome.text, "greedy: the answer without drafts"


def test_drafts_keep_max_tokens_and_stop_strings_to_the_token(engine):
    drafting = Batcher(engine.llm, 2, draft_most=8, any_shape=engine.batcher.any_shape)
    short, seq, _ = run(engine, drafting, [{"role": "user", "content": COPY}], {**GREEDY, "max_tokens": 7})
    assert (short.completion_tokens, short.finish_reason) == (7, "length")
    assert cache_ends_at(engine, drafting, seq) == len(seq.cached)
    whole, _, _ = run(engine, drafting, [{"role": "user", "content": COPY}], GREEDY)
    stop = whole.text.split()[5]
    stopped, _, _ = run(engine, drafting, [{"role": "user", "content": COPY}], {**GREEDY, "stop": [stop]})
    assert stopped.finish_reason == "stop" and stop not in stopped.text
    assert whole.text.startswith(stopped.text)


def test_a_seeded_sampled_answer_with_drafts_is_the_same_each_time(engine):
    sampled = {**GREEDY, "temperature": 0.8, "top_p": 0.95, "seed": 7}
    drafting = Batcher(engine.llm, 2, draft_most=8, any_shape=engine.batcher.any_shape)
    first, seq, _ = run(engine, drafting, [{"role": "user", "content": COPY}], sampled)
    again, _, _ = run(engine, drafting, [{"role": "user", "content": COPY}], sampled)
    assert first.accepted and first.trips < first.completion_tokens
    assert again.text == first.text and again.completion_tokens == first.completion_tokens
    assert cache_ends_at(engine, drafting, seq) == len(seq.cached)


def test_where_a_step_s_shape_changes_a_token_s_numbers_only_unseeded_sampled_answers_draft(engine):
    """jobs/engine/shapes.py found otherwise on a GPU: drafts would change greedy and seeded answers there."""
    drafting = Batcher(engine.llm, 2, draft_most=8, any_shape=False)
    drafting.forget_all()  # the context is shared with the other tests' batchers
    prompt, stops = engine.chat_prompt([{"role": "user", "content": COPY}])
    sampled = {**GREEDY, "temperature": 0.8, "top_p": 0.95}
    # The greedy answer stops early: the sampled one goes on alone (two sequences draft only when both can).
    outcomes = [drafting.add(engine.work(key, prompt, params, lambda text: None, stops, reuse=reuse))
                for key, params, reuse in ((1, {**GREEDY, "max_tokens": 4}, False), (2, sampled, True))]
    while drafting.busy:
        drafting.step()
    assert outcomes[0].drafted == 0 and outcomes[0].completion_tokens
    assert outcomes[1].drafted > 0


def test_a_draft_is_padded_from_shorter_n_grams_to_keep_pace_with_the_others():
    index = NgramIndex()
    index.add([5, 6, 7, 5])
    assert index.draft(3) == [], "7 5 was never seen before"
    assert index.padded([], 3) == [6, 7, 5], "after the last 5 seen before came 6 7 5"
    index.add([9])
    assert index.padded([4], 3) == [4, 4, 4], "nothing followed a 4: the draft's last token again"
