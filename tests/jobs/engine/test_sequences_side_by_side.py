"""Which sequence a new job gets. With one KV stream per sequence llama.cpp computes a step in one pass only
for consecutive sequence ids; each gap costs another pass through every laptop. So a job joining the batch
fills the gap an ended job left, rather than taking the sequence unused the longest (run on the head)."""

import pytest

from jobs.engine.loaded_model import Engine
from jobs.engine.sequences import runs
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
