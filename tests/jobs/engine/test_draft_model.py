"""Speculative decoding with a draft model on the head (jobs/engine/draft_model.py), with real weights: the bundled
model as target; as drafts the bundled model itself (the ceiling: every guess is the model's own) and a draft cut
from its first layers (scripts/cut_draft.py). Greedy answers are the answers without drafts, token for token;
the cache holds only what was kept; two sequences draft together; a model of another vocabulary is refused in
words; the cutting tool refuses what it cannot cut."""

import pytest

from jobs.engine.draft_model import DraftError, ModelDraft
from jobs.engine.loaded_model import Engine
from jobs.engine.sequences import Batcher
from models_app.library.bundled import bundled_model_path
from scripts.cut_draft import main as cut_main
from tests.drafts import cut_draft, other_vocabulary
from tests.jobs.conftest import head_engine

pytestmark = pytest.mark.timeout(300)
GREEDY = {"temperature": 0.0, "top_p": 1.0, "top_k": 40, "repeat_penalty": 1.0, "max_tokens": 32, "stop": []}
ASKED = [[{"role": "user", "content": "Explain what a lighthouse does, in three sentences."}],
         [{"role": "user", "content": "List five fruits and their colours."}]]


@pytest.fixture(scope="module")
def engine() -> Engine:
    return head_engine(1024, slots=2)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("drafts")


def answer(engine: Engine, batcher: Batcher, asked: list[list[dict]]):
    """Each chat's outcome, all run at once on `batcher`, greedy."""
    batcher.forget_all()
    if batcher.draft_model is not None:
        batcher.draft_model.forget_all()
    outcomes = []
    for key, messages in enumerate(asked):
        prompt, stops = engine.chat_prompt(messages)
        outcomes.append(batcher.add(engine.work(key, prompt, GREEDY, lambda text: None, stops, reuse=False)))
    while batcher.busy:
        batcher.step()
    return outcomes


def drafting_with(engine: Engine, path) -> Batcher:
    batcher = Batcher(engine.llm, 2, draft_most=6, any_shape=engine.batcher.any_shape)
    batcher.draft_model = ModelDraft(str(path), 1024, 2, engine.llm)
    return batcher


def test_the_model_itself_as_its_draft_has_every_guess_kept_and_answers_as_without(engine):
    alone = answer(engine, engine.batcher, ASKED[:1])[0]
    batcher = drafting_with(engine, bundled_model_path())
    try:
        drafted = answer(engine, batcher, ASKED[:1])[0]
    finally:
        batcher.draft_model.close()
    assert drafted.text == alone.text, "greedy: the answer without a draft"
    assert drafted.drafted >= 20 and drafted.accepted >= 0.95 * drafted.drafted, (drafted.accepted, drafted.drafted)
    assert drafted.trips <= drafted.completion_tokens / 3, (drafted.trips, drafted.completion_tokens)


def test_a_cut_draft_answers_as_without_and_the_cache_holds_only_what_was_kept(engine, folder):
    alone = [answer(engine, engine.batcher, [asked])[0] for asked in ASKED]
    batcher = drafting_with(engine, cut_draft(folder))
    try:
        together = answer(engine, batcher, ASKED)
        steps = batcher.draft_model.steps
    finally:
        batcher.draft_model.close()
    assert [outcome.text for outcome in together] == [outcome.text for outcome in alone], \
        "greedy, two drafting at once: each the answer it gives alone without a draft"
    assert all(outcome.drafted for outcome in together) and steps
    assert sum(outcome.accepted for outcome in together) > 0, "a cut of the model's own layers guesses some"
    for seq in batcher.sequences:
        held = batcher.api.llama_memory_seq_pos_max(batcher.memory, seq.seq_id) + 1
        assert held == len(seq.cached), "no drafted token it did not keep"


def test_a_draft_of_another_vocabulary_is_refused_in_words(engine, folder):
    with pytest.raises(DraftError, match="token 1000 is .*a draft must share the model's vocabulary"):
        ModelDraft(str(other_vocabulary(folder)), 1024, 2, engine.llm)


def test_the_cutting_tool_refuses_what_it_cannot_cut_and_leaves_no_file(folder, capsys):
    target = folder / "too-many.gguf"
    assert cut_main([str(bundled_model_path()), str(target), "--layers", "30"]) == 2
    assert "has 30 layers: a draft keeps 1 to 29 of them, not 30" in capsys.readouterr().err
    assert not target.exists()
    kept = cut_draft(folder)
    assert cut_main([str(bundled_model_path()), str(kept), "--layers", "4"]) == 2, "it overwrites nothing"
    assert "exists" in capsys.readouterr().err


def test_a_seeded_sampled_answer_with_a_draft_is_the_answer_without_and_a_cancel_leaves_nothing_behind(engine):
    """A drafted token is kept where the model's own sample at its place is that token, and each place is sampled
    once from the same chain: under the same seed the answer is the one without drafts, token for token (so its
    distribution is the model's). A job cancelled mid-draft leaves its sequence to the next job clean."""
    sampled = {**GREEDY, "temperature": 0.9, "top_p": 0.95, "seed": 11, "max_tokens": 24}
    prompt, stops = engine.chat_prompt(ASKED[1])
    engine.batcher.forget_all()
    plain = engine.batcher.add(engine.work(1, prompt, sampled, lambda text: None, stops))
    while engine.batcher.busy:
        engine.batcher.step()
    batcher = drafting_with(engine, bundled_model_path())
    try:
        batcher.forget_all()
        drafted = batcher.add(engine.work(2, prompt, sampled, lambda text: None, stops))
        while batcher.busy:
            batcher.step()
        assert drafted.text == plain.text, "the same seed: the answer without drafts"
        assert drafted.accepted and drafted.trips < drafted.completion_tokens, "a greedy guess is often the sample"

        cut_short = batcher.add(engine.work(3, engine.chat_prompt(ASKED[0])[0], GREEDY, lambda text: None, stops))
        while cut_short.trips < 2:
            batcher.step()
        (seq,) = batcher.busy
        batcher.cancel(seq)
        again = batcher.add(engine.work(4, prompt, sampled, lambda text: None, stops))
        while batcher.busy:
            batcher.step()
        assert again.text == plain.text, "after a cancel mid-draft, the next job's answer is its own"
    finally:
        batcher.draft_model.close()


def test_a_draft_is_loaded_for_the_cpu_alone():
    """Without a device list llama.cpp gives a model every device of the process, a deployment's laptops (RPC
    devices) included, and its context a backend on each: a draft on the head asks for none."""
    import ctypes

    from llama_cpp import llama as llama_module

    from models_app.llamacpp import libllama

    with libllama.model_params(cpu_only=True):
        pinned = llama_module.llama_cpp.llama_model_default_params()
        listed = ctypes.cast(pinned.devices, ctypes.POINTER(ctypes.c_void_p))
        assert pinned.devices and listed[0] is None, "an empty, NULL-terminated list: the CPU alone"
    with libllama.model_params():
        assert not llama_module.llama_cpp.llama_model_default_params().devices, "others: llama.cpp's choice"
