"""Slots in the planner: each person at once has a KV stream of the whole context, the working memory stays
that of one micro-batch, the default is the most of 8, 4, 2, 1 that fit, and a plan that does not fit says
how many slots, or how long a context, would."""

from models_app.planning.fit import explain_no_fit, most_slots
from models_app.planning.planner import (
    Calibration,
    Machine,
    MiB,
    ModelShape,
    Options,
    head_compute_bytes,
    kv_bytes_per_layer,
    layer_compute_bytes,
    plan_mode,
    stage_memory,
)
from models_app.planning.records import people_at_once, why_these_slots

SHAPE = ModelShape(layer_bytes=(100 * MiB,) * 8, token_embd_bytes=50 * MiB, output_bytes=40 * MiB,
                   n_embd=1024, n_head=8, n_head_kv=2, vocab_size=32000)
OPTIONS = Options(ctx=4096, head_may_hold_layers=False,
                  calibration=Calibration(server_base=8 * MiB, head_base=8 * MiB))
HEAD = Machine("head", 1024 * MiB, 20)


def one_laptop_with_room_for(slots: int) -> Machine:
    """A laptop that holds the whole model with `slots` slots, and not a byte more."""
    memory = stage_memory(SHAPE, 0, SHAPE.n_layer + 1, OPTIONS.with_(slots=slots), is_head=False)
    return Machine("lab-1", memory.total, 10, 0.001)


def test_it_gives_every_slot_its_own_kv_cache_of_the_whole_context():
    one, four = OPTIONS, OPTIONS.with_(slots=4)
    assert kv_bytes_per_layer(SHAPE, one) == 2 * 4096 * 128 * 2 * 2  # keys and values, f16, 2 KV heads of 128
    assert kv_bytes_per_layer(SHAPE, four) == 4 * kv_bytes_per_layer(SHAPE, one)
    assert layer_compute_bytes(SHAPE, four) == layer_compute_bytes(SHAPE, one), "a micro-batch is split among streams"
    assert head_compute_bytes(SHAPE, four) - head_compute_bytes(SHAPE, one) == 3 * SHAPE.vocab_size * 4, "logits"


def test_it_pads_each_stream_as_llama_cpp_does():
    """llama.cpp pads the whole context to 256 cells, then each sequence's share (llama_context's n_ctx_seq)."""
    assert Options(ctx=300).stream == 512
    assert Options(ctx=300, slots=3).stream == 512  # 900 → 1024 cells, 341 each → 512
    assert Options(ctx=2048, slots=4).stream == 2048
    assert kv_bytes_per_layer(SHAPE, Options(ctx=300, slots=3)) == 3 * kv_bytes_per_layer(SHAPE, Options(ctx=512))


def test_it_predicts_one_persons_speed_whatever_the_slots():
    """A token of one sequence reads the weights and its own stream, not every slot's."""
    laptops = [one_laptop_with_room_for(8)]
    alone, eight = (plan_mode("even", SHAPE, HEAD, laptops, OPTIONS.with_(slots=n)) for n in (1, 8))
    assert abs(alone.seconds_per_token - eight.seconds_per_token) < 1e-12
    assert eight.kv_cache == 8 * alone.kv_cache and eight.slots == 8 and eight.ctx == 4096


def test_it_offers_the_most_slots_that_fit_and_says_why():
    plan = most_slots("fastest", SHAPE, HEAD, [one_laptop_with_room_for(4)], OPTIONS)
    assert plan.slots == 4
    assert why_these_slots(plan.slots, plan.ctx) == (
        "With 8 slots of 4096 tokens each it would not fit these machines; 4 fit.")
    assert most_slots("fastest", SHAPE, HEAD, [one_laptop_with_room_for(8)], OPTIONS).slots == 8
    assert most_slots("fastest", SHAPE, HEAD, [one_laptop_with_room_for(1)], OPTIONS).slots == 1
    assert most_slots("fastest", SHAPE, HEAD, [Machine("tiny", 100 * MiB, 10)], OPTIONS) is None


def test_it_says_which_fewer_slots_or_shorter_context_would_fit():
    laptops = [one_laptop_with_room_for(2)]
    eight = OPTIONS.with_(slots=8)
    assert plan_mode("fastest", SHAPE, HEAD, laptops, eight) is None
    why = explain_no_fit(SHAPE, HEAD, laptops, eight)
    assert why.largest_slots == 2 and why.largest_ctx == 1024
    assert plan_mode("fastest", SHAPE, HEAD, laptops, eight.with_(ctx=1024)), "the context hint keeps the slots"
    assert plan_mode("fastest", SHAPE, HEAD, laptops, eight.with_(ctx=2048)) is None
    text = why.explain()
    assert "with 8 slots" in text and "With 2 slots it would fit." in text
    assert "A context of 1024 tokens with 8 slots would fit." in text


def test_it_says_in_words_how_many_people_a_plan_serves():
    record = {"slots": 4, "ctx": 2048, "kv_cache": 60 * MiB}
    assert people_at_once(record) == (
        "4 people at once, each up to 2048 tokens (the KV cache takes 60 MiB in all, 15 MiB each).")
    assert people_at_once({"slots": 1, "ctx": 512, "kv_cache": 15 * MiB}) == (
        "1 person at a time, up to 512 tokens (the KV cache takes 15 MiB).")
