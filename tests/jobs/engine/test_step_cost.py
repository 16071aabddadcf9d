"""Which prompts a step reads first: the shortest, where the engine's steps show that a token costs time
(compute-bound laptops); all together where a step costs the same whatever it carries (memory-bound ones)."""

import pytest

from jobs.engine.loaded_model import Engine
from jobs.engine.stepcost import FIT_AFTER, POSTPONE_MOST, StepCost
from tests.jobs.conftest import head_engine

pytestmark = pytest.mark.timeout(300)
SHORT = "Say hello."
LONG = "Summarise this: " + " ".join(f"The lighthouse keeper counted {n} ships that night." for n in range(20))


def steps_of(cost: StepCost, per_step: float, per_token: float, sizes=(1, 4, 8, 16, 32, 64, 2, 40)) -> StepCost:
    for n in sizes:
        cost.observe(n, per_step + per_token * n)
    return cost


def test_until_the_steps_show_what_a_token_costs_every_prompt_is_read_together():
    cost = StepCost()
    for _ in range(FIT_AFTER - 1):
        cost.observe(8, 0.2)
    assert cost.fit() is None and cost.take(0, [1, 40, 40]) == 3, "too few steps seen"
    for _ in range(20):
        cost.observe(8, 0.2)
    assert cost.fit() is None and cost.take(0, [1, 40, 40]) == 3, "steps of one size: nothing to fit"
    falling = StepCost()
    for n in (1, 4, 8, 16, 32, 64, 2, 40):
        falling.observe(n, 1.0 - n / 100)
    assert falling.fit() is None, "a cost that falls with tokens is noise, not a reason to split"


def test_where_tokens_cost_time_the_short_reads_go_first():
    cost = steps_of(StepCost(), 0.02, 0.016)  # this machine's simulated laptops: about 16 ms a token
    per_step, per_token = cost.fit()
    assert per_step == pytest.approx(0.02) and per_token == pytest.approx(0.016)
    # four conversations whose prompts were cached (one token left each) and two new 34-token prompts
    assert cost.take(2, [1, 1, 1, 1, 34, 34]) == 4
    assert cost.take(0, [34, 34]) == 1, "equal prompts: one after the other halves the mean wait"
    assert cost.take(0, [34]) == 1


def test_where_a_step_costs_a_trip_whatever_it_carries_everything_is_read_together():
    cost = steps_of(StepCost(), 0.5, 0.0002)  # memory-bound laptops: each step reads every weight once
    assert cost.take(2, [1, 1, 1, 1, 34, 34]) == 6
    assert cost.take(0, [34, 34]) == 2


def test_a_read_left_out_long_enough_goes_in():
    cost = steps_of(StepCost(), 0.0, 0.016)
    assert cost.take(0, [300, 200, 1]) == 1
    assert cost.take(0, [300, 200, 1], at_least=2) >= 2, "the two whose turn came both go in"
    assert cost.take(0, [1, 1, 200]) == 2, "without its turn the long one waits"


@pytest.fixture(scope="module")
def engine() -> Engine:
    return head_engine(512, slots=2)


def run_both(engine: Engine, cost: StepCost) -> tuple[list[tuple[int, bool]], dict[int, str]]:
    """A short and a long prompt added together; after the first step, whether each has its first token and
    still has prompt to read; then both run to the end. Returns that and their texts."""
    for seq in engine.batcher.busy:
        engine.batcher.cancel(seq)
    engine.batcher.forget_all()
    engine.batcher.cost = cost
    works = {}
    for key, text in ((1, LONG), (2, SHORT)):
        prompt, stops = engine.chat_prompt([{"role": "user", "content": text}])
        params = {"temperature": 0.0, "top_p": 1.0, "top_k": 40, "repeat_penalty": 1.0, "max_tokens": 8, "stop": []}
        works[key] = engine.work(key, prompt, params, lambda piece: None, stops)
        engine.batcher.add(works[key])
    assert len(works[1].prompt) > 4 * len(works[2].prompt)
    texts = dict(engine.batcher.step())
    after_one = []
    for key in (1, 2):
        seq = next(seq for seq in engine.batcher.sequences if seq.work is works[key])
        after_one.append((seq.outcome.completion_tokens, bool(seq.todo)))
    while engine.batcher.busy:
        texts.update(engine.batcher.step())
    return after_one, {key: outcome.text for key, outcome in texts.items()}


def test_the_engine_reads_the_short_prompt_first_on_laptops_where_tokens_cost_and_the_answers_stay(engine):
    split, split_texts = run_both(engine, steps_of(StepCost(), 0.002, 0.01))
    assert split == [(0, True), (1, False)], "the short prompt read and answering; the long one not yet begun"
    together, together_texts = run_both(engine, steps_of(StepCost(), 0.5, 0.0001))
    assert together == [(1, False), (1, False)], "both read in the first step"
    assert split_texts == together_texts and all(split_texts.values()), "greedy answers whatever the steps"


def test_the_long_prompt_is_not_held_back_for_ever(engine):
    """New short prompts keep coming; the long one still starts within POSTPONE_MOST steps."""
    for seq in engine.batcher.busy:
        engine.batcher.cancel(seq)
    engine.batcher.forget_all()
    engine.batcher.cost = steps_of(StepCost(), 0.002, 0.01)
    params = {"temperature": 0.0, "top_p": 1.0, "top_k": 40, "repeat_penalty": 1.0, "max_tokens": 1, "stop": []}
    prompt, stops = engine.chat_prompt([{"role": "user", "content": LONG}])
    long = engine.work(1, prompt, params, lambda piece: None, stops)
    engine.batcher.add(long)
    waited = 0
    for key in range(2, 2 + POSTPONE_MOST + 2):
        if not any(seq.work is long and seq.todo for seq in engine.batcher.sequences):
            break
        short, stops = engine.chat_prompt([{"role": "user", "content": f"{SHORT} ({key})"}])
        engine.batcher.add(engine.work(key, short, params, lambda piece: None, stops))
        engine.batcher.step()
        waited += 1
    assert waited <= POSTPONE_MOST + 1, "the long prompt was read at the latest once its turn came"
    while engine.batcher.busy:
        engine.batcher.step()
