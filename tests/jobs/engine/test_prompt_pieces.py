"""Prompts read in pieces that end at their turns (jobs/engine/pieces.py), so a greedy or seeded request reuses a
cached prefix and still gives the answer it gives read afresh: the plan of pieces, which cached prefix counts
as read the same way, where a chat prompt is cut; and on the bundled model, a conversation's next turn and a
question sharing only the template's preamble, each reused and each equal to its fresh read."""

import pytest

from jobs.engine import pieces
from jobs.engine.loaded_model import Engine
from tests.jobs.conftest import head_engine

pytestmark = pytest.mark.timeout(300)
GREEDY = {"temperature": 0.0, "top_p": 1.0, "top_k": 40, "repeat_penalty": 1.0, "max_tokens": 16, "stop": []}
QUESTIONS = ["Why is the sky blue?", "Name three rivers in Europe.", "How do bees make honey?",
             "What is a lighthouse for?"]


def test_a_plan_cuts_at_each_cut_and_every_step_after_one():
    assert pieces.plan(10, (), 512) == [10]
    assert pieces.plan(1300, (), 512) == [512, 1024, 1300]
    assert pieces.plan(700, (24, 600), 512) == [24, 536, 600, 700]
    assert pieces.plan(30, (0, 24, 30, 45), 512) == [24, 30], "cuts outside the prompt are no cuts"


def test_only_a_prefix_read_in_the_plan_s_own_pieces_is_reused():
    planned = pieces.plan(100, (24, 67), 512)  # [24, 67, 100]
    assert pieces.exact_prefix([24, 67, 68, 69], planned, 99) == 67, "a previous turn: its prompt, not its answer"
    assert pieces.exact_prefix([24, 67, 68], planned, 50) == 24, "shared only partly into the second piece"
    assert pieces.exact_prefix([24, 30, 67], planned, 99) == 24, "read in other pieces after the preamble"
    assert pieces.exact_prefix([64, 67], planned, 99) == 0, "read beside others, in pieces of 64"
    assert pieces.exact_prefix([], planned, 99) == 0


def fake_template(some: list[dict], answer: bool) -> str:
    """SmolLM2's layout: a default system prompt unless the first message is one, an answer prompt on request."""
    text = "" if some and some[0]["role"] == "system" else "<s>system\nBe helpful.</s>\n"
    text += "".join(f"<s>{m['role']}\n{m['content']}</s>\n" for m in some)
    return text + ("<s>assistant\n" if answer else "")


def by_characters(text: str, first: bool) -> list[int]:
    return [ord(c) for c in text]


def test_a_chat_prompt_is_cut_after_the_preamble_and_where_each_answer_begins():
    talk = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
            {"role": "user", "content": "More"}]
    text = fake_template(talk, True)
    cuts = pieces.turn_cuts(fake_template, by_characters, talk, text, by_characters(text, True))
    preamble = "<s>system\nBe helpful.</s>\n<s>user\n"
    first_turn = fake_template(talk[:1], True)
    assert cuts == (len(preamble), len(first_turn)), "the first turn's whole prompt is one of the pieces"
    assert pieces.turn_cuts(fake_template, lambda t, f: by_characters(t, f)[:1], talk, text,
                            by_characters(text, True)) == (), "pieces that do not make the prompt: no cuts"

    def refusing(some, answer):
        if len(some) < 3:
            raise ValueError("roles must alternate")
        return fake_template(some, answer)

    assert pieces.turn_cuts(refusing, by_characters, talk, text, by_characters(text, True)) == ()


@pytest.fixture(scope="module")
def engine() -> Engine:
    return head_engine(1024, slots=2)


def answer(engine: Engine, messages: list[dict], fresh: bool):
    prompt, stops = engine.chat_prompt(messages)
    if fresh:
        engine.batcher.forget_all()
    outcome = engine.batcher.add(engine.work(1, prompt, GREEDY, lambda text: None, stops, reuse=False,
                                             cuts=engine.turn_cuts(messages, prompt)))
    while engine.batcher.busy:
        engine.batcher.step()
    return outcome, len(prompt)


@pytest.mark.parametrize("any_shape", [True, False], ids=["any shape", "in pieces"])
def test_a_greedy_next_turn_reuses_the_turn_before_and_answers_as_read_afresh(engine, any_shape):
    """Where a step's shape does not change a token's numbers (shapes.py: so on the head here) the cached prompt and
    as much of its answer as tokenizes alike are reused; where it would, exactly the first turn's pieces."""
    assert engine.batcher.any_shape, "the engine's own check at load: the head's CPU computes any shape alike"
    engine.batcher.any_shape = any_shape
    try:
        for question in QUESTIONS[:2]:
            turn = [{"role": "user", "content": question}]
            first, first_length = answer(engine, turn, fresh=True)
            talk = [*turn, {"role": "assistant", "content": first.text}, {"role": "user", "content": "Say more."}]
            reused, _ = answer(engine, talk, fresh=False)
            afresh, _ = answer(engine, talk, fresh=True)
            if any_shape:
                assert reused.reused_tokens > first_length, "the first turn's prompt, and its answer's tokens"
            else:
                assert reused.reused_tokens == first_length, "the whole first turn's prompt, read in its pieces"
            assert afresh.reused_tokens == 0
            assert reused.completion_tokens and reused.text == afresh.text
    finally:
        engine.batcher.any_shape = True


def test_a_greedy_question_reuses_the_template_s_preamble_and_answers_as_read_afresh(engine):
    answer(engine, [{"role": "user", "content": QUESTIONS[2]}], fresh=True)
    other = [{"role": "user", "content": QUESTIONS[3]}]
    reused, length = answer(engine, other, fresh=False)
    afresh, _ = answer(engine, other, fresh=True)
    assert 0 < reused.reused_tokens < length - 4, "the default system prompt, not the question"
    assert reused.completion_tokens and reused.text == afresh.text
