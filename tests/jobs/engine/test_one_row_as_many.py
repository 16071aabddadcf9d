"""The built llama.cpp gives a token the same numbers whether its step reads it alone or among others
(scripts/llama_patches/0005-one-row-as-many.patch): the bundled model's logits for tokens decoded one a step equal,
to the bit, those of the same tokens decoded in one step. Greedy answers then do not depend on how their tokens
were grouped (speculative decoding, prompt pieces, batching)."""

import ctypes

import numpy as np
import pytest

from tests.jobs.conftest import head_engine

pytestmark = pytest.mark.timeout(300)


def test_a_token_read_alone_and_among_others_has_the_same_logits():
    engine = head_engine(512, slots=1)
    api, ctx, n_vocab = engine.batcher.api, engine.batcher.ctx, engine.llm.n_vocab()
    batch = engine.batcher.batch

    def decode(tokens: list[int], at: int) -> list[np.ndarray]:
        for i, token in enumerate(tokens):
            batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.logits[i] = token, at + i, 1, True
            batch.seq_id[i][0] = 0
        batch.n_tokens = len(tokens)
        assert api.llama_decode(ctx, batch) == 0
        rows = [api.llama_get_logits_ith(ctx, i) for i in range(len(tokens))]
        return [np.ctypeslib.as_array(ctypes.cast(row, ctypes.POINTER(ctypes.c_float)), shape=(n_vocab,)).copy()
                for row in rows]

    prompt, _ = engine.chat_prompt([{"role": "user", "content": "Write a Python function that adds two numbers."}])
    more = engine.llm.tokenize(b"```python\ndef add(a, b):\n    return a + b", add_bos=False, special=False)
    engine.batcher.forget_all()
    decode(prompt, 0)
    alone = [decode([token], len(prompt) + i)[0] for i, token in enumerate(more)]
    api.llama_memory_seq_rm(engine.batcher.memory, 0, len(prompt), -1)
    together = decode(more, len(prompt))
    engine.batcher.forget_all()
    differing = [i for i, (a, b) in enumerate(zip(alone, together, strict=True)) if not np.array_equal(a, b)]
    assert not differing, (f"rows {differing} differ, by up to "
                           f"{max(float(np.abs(alone[i] - together[i]).max()) for i in differing):.3f}")
