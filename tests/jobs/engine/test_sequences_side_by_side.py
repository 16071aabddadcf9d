"""Which sequence a new job gets. With one KV stream per sequence llama.cpp computes a step in one pass only
for consecutive sequence ids; each gap costs another pass through every laptop. So a job joining the batch
fills the gap an ended job left, rather than taking the sequence unused the longest (run on the head)."""

import math

import pytest

from jobs.engine.loaded_model import Engine
from jobs.engine.sequences import PREFILL_BESIDE_OTHERS, WHOLE_BESIDE_OTHERS, common_prefix, runs
from tests.jobs.conftest import head_engine

pytestmark = pytest.mark.timeout(300)
ESSAY = "Write a long essay about lighthouses, with many sections."


def greedy(tokens: int) -> dict:
    return {"temperature": 0.0, "top_p": 1.0, "top_k": 40, "repeat_penalty": 1.0, "max_tokens": tokens, "stop": []}


@pytest.fixture(scope="module")
def engine() -> Engine:
    return head_engine(512, slots=4)


def add(engine: Engine, key: int, tokens: int) -> int:
    prompt, stops = engine.chat_prompt([{"role": "user", "content": f"{ESSAY} ({key})"}])
    work = engine.work(key, prompt, greedy(tokens), lambda text: None, stops)
    engine.batcher.add(work)
    return next(seq.seq_id for seq in engine.batcher.sequences if seq.work is work)


def fresh(engine: Engine) -> None:
    """No job left by an earlier test (one that failed midway), no cache."""
    for seq in engine.batcher.busy:
        engine.batcher.cancel(seq)
    engine.batcher.forget_all()


def busy_ids(engine: Engine) -> set[int]:
    return {seq.seq_id for seq in engine.batcher.busy}


def test_runs_counts_the_passes_a_step_takes():
    assert runs(set()) == 0
    assert runs({0, 1, 2}) == 1
    assert runs({0, 2, 3}) == 2
    assert runs({1, 3, 5, 6}) == 3


def test_a_new_job_fills_the_gap_an_ended_job_left(engine):
    engine.batcher.forget_all()
    first = [add(engine, 1, 24), add(engine, 2, 2), add(engine, 3, 24)]
    assert first == [0, 1, 2], "side by side from the lowest"
    ended = []
    while not ended:
        ended = engine.batcher.step()
    assert [key for key, _ in ended] == [2], "the short job in the middle ended first"
    assert busy_ids(engine) == {0, 2}
    assert add(engine, 4, 8) == 1, "the gap was filled, not sequence 3 (never used, so unused the longest)"
    assert runs(busy_ids(engine)) == 1
    while engine.batcher.busy:
        engine.batcher.step()


def test_beside_a_running_answer_a_short_prompt_is_read_in_one_step_and_a_long_one_in_pieces(engine):
    """A chat turn's prompt joins the running answers whole, so its first token waits one step (it took two when
    its last few tokens went into a step of their own); a long prompt is read in pieces, so the answers already
    running keep flowing between them."""
    fresh(engine)
    add(engine, 1, 64)
    engine.batcher.step()  # the first job's prompt, read alone
    question = f"{ESSAY} {ESSAY} Explain why, in detail, for a child. (2)"
    short = engine.chat_prompt([{"role": "user", "content": question}])[0]
    assert PREFILL_BESIDE_OTHERS < len(short) <= WHOLE_BESIDE_OTHERS
    joined = engine.batcher.add(engine.work(2, short, greedy(4), lambda text: None, []))
    engine.batcher.step()
    assert joined.completion_tokens == 1, "its first token after one step"

    long = engine.chat_prompt([{"role": "user", "content": ESSAY * 20}])[0]
    assert len(long) > 4 * PREFILL_BESIDE_OTHERS
    reading = engine.batcher.add(engine.work(3, long, greedy(4), lambda text: None, []))
    steps = 0
    while not reading.completion_tokens:
        engine.batcher.step()
        steps += 1
    left = len(long) - reading.reused_tokens  # the chat template's preamble, copied from another sequence
    assert steps == math.ceil((left - WHOLE_BESIDE_OTHERS) / PREFILL_BESIDE_OTHERS) + 1, (steps, left)
    while engine.batcher.busy:
        engine.batcher.step()


def run_all(engine: Engine) -> dict[int, str]:
    """Step until every job ended: each job's text by its key."""
    texts = {}
    while engine.batcher.busy:
        texts.update({key: outcome.text for key, outcome in engine.batcher.step()})
    return texts


def test_a_prefix_a_busy_sequence_holds_is_copied_not_read_again_and_changes_no_answer(engine):
    """Requests that share a long system prompt: the second, joining while the first answers, takes the prefix
    from the first one's cache (kvcache.copy) and reads only the rest; both answer as each does alone."""
    system = {"role": "system", "content": "You keep a lighthouse on a rocky island and answer visitors. " * 5}
    asked = {1: [system, {"role": "user", "content": "What do you do in a storm?"}],
             2: [system, {"role": "user", "content": "What do you eat in winter?"}]}
    prompts = {key: engine.chat_prompt(messages)[0] for key, messages in asked.items()}
    shared = common_prefix(prompts[1], prompts[2])
    assert shared > 40

    fresh(engine)
    engine.batcher.add(engine.work(1, prompts[1], greedy(24), lambda text: None, []))
    engine.batcher.step()
    joined = engine.batcher.add(engine.work(2, prompts[2], greedy(24), lambda text: None, []))
    assert joined.reused_tokens == shared, "the shared prefix, copied from the busy sequence"
    together = run_all(engine)

    for key, prompt in prompts.items():
        fresh(engine)
        engine.batcher.add(engine.work(key, prompt, greedy(24), lambda text: None, []))
        assert run_all(engine)[key] == together[key], f"job {key} answered as it does alone"
