"""Drafts from a draft model: a small model with the target's vocabulary, on the head's CPU, guessing the next
tokens of every generating sequence greedily, in steps of its own that carry all those sequences at once.

Its context holds a sequence for each of the target's, under the same id, and keeps what it read: before each
draft it reads only what the target's sequence holds that it does not (the prompt once, then the token or two
the last step kept), after dropping what the target did not keep. A greedy draft is one-hot, so the target's
verification (jobs/engine/sequences.py) keeps the target's distribution exactly as n-gram drafts do.

The draft is read on the head while the laptops wait: each drafted token costs a step of the small model, and
pays when it saves a trip through the pipeline (docs/api.md, "Drafting").
"""

import logging

import numpy as np

from jobs.engine.sequences import common_prefix
from models_app.llamacpp import libllama
from models_app.llamacpp.oneshot import sequences

log = logging.getLogger(__name__)
STEP_TOKENS = 512
FAILURES_IN_A_ROW = 3
MAX_VOCAB_DIFFERENCE = 128  # tokens a draft's vocabulary may lack at its end: a model's padding (llama.cpp's too)


class DraftError(RuntimeError):
    pass


class ModelDraft:
    def __init__(self, path: str, ctx: int, slots: int, target) -> None:
        import llama_cpp
        from llama_cpp import Llama

        self.path, self.api = path, llama_cpp
        try:
            with sequences(slots), libllama.model_params(cpu_only=True):
                self.llm = Llama(model_path=path, n_ctx=ctx * slots, n_batch=STEP_TOKENS, n_gpu_layers=0,
                                 verbose=False)
        except (ValueError, RuntimeError) as exc:
            raise DraftError(f"llama.cpp could not load the draft model: {exc}") from None
        found = differs(llama_cpp, self.llm, target)
        if found is not None:
            self.llm.close()
            raise DraftError(found)
        self.ctx = self.llm._ctx.ctx
        self.memory = llama_cpp.llama_get_memory(self.ctx)
        self.n_vocab = self.llm.n_vocab()
        self.batch = llama_cpp.llama_batch_init(STEP_TOKENS, 0, 1)
        self.cached: dict[int, list[int]] = {}  # sequence id → the tokens its cache holds
        self.steps = 0  # decode steps of the draft model, for the bench
        self.failures = 0  # steps in a row that could not draft
        self.broken = ""  # why it no longer drafts, after FAILURES_IN_A_ROW

    def draft(self, wanted: list[tuple[int, list[int], int]]) -> list[list[int]]:
        """For each (sequence id, the tokens its next token follows, most tokens wanted): as many tokens drafted
        for each as the fewest wanted (a step of the target reads as many from each: sequences.Batcher._fill)."""
        k = min((most for _, _, most in wanted), default=0)
        if k <= 0:
            return [[] for _ in wanted]
        feeds = []
        for seq_id, known, _ in wanted:
            have = self.cached.setdefault(seq_id, [])
            keep = min(common_prefix(have, known), len(known) - 1)  # its last token is read again for its logits
            if keep < len(have):
                self.api.llama_memory_seq_rm(self.memory, seq_id, keep, -1)
                del have[keep:]
            feeds.append((seq_id, known[keep:]))
        try:
            best = self._read(feeds)
            drafts = {seq_id: [best[seq_id]] for seq_id, _ in feeds}
            for _ in range(k - 1):
                best = self._read([(seq_id, made[-1:]) for seq_id, made in drafts.items()])
                for seq_id, made in drafts.items():
                    made.append(best[seq_id])
        except DraftError as exc:  # no draft this step: the target goes on a token at a time
            log.warning("draft model: %s; its caches are cleared", exc)
            self.forget_all()
            self.failures += 1
            if self.failures >= FAILURES_IN_A_ROW:
                self.broken = f"it failed {self.failures} steps in a row ({exc}); n-grams draft instead"
            return [[] for _ in wanted]
        self.failures = 0
        return [drafts[seq_id] for seq_id, _, _ in wanted]

    def _read(self, feeds: list[tuple[int, list[int]]]) -> dict[int, int]:
        """Read each sequence's tokens, in steps of up to STEP_TOKENS; the likeliest token after each one's
        last."""
        batch, best, lasts, n = self.batch, {}, {}, 0
        for seq_id, tokens in feeds:
            have = self.cached[seq_id]
            for i, token in enumerate(tokens):
                if n == STEP_TOKENS:
                    self._decode(n, lasts, best)
                    n, lasts = 0, {}
                batch.token[n], batch.pos[n], batch.n_seq_id[n] = token, len(have) + i, 1
                batch.seq_id[n][0] = seq_id
                batch.logits[n] = i == len(tokens) - 1
                if batch.logits[n]:
                    lasts[seq_id] = n
                n += 1
            have.extend(tokens)
        if n:
            self._decode(n, lasts, best)
        return best

    def _decode(self, n: int, lasts: dict[int, int], best: dict[int, int]) -> None:
        self.batch.n_tokens = n
        code = self.api.llama_decode(self.ctx, self.batch)
        self.steps += 1
        if code != 0:
            raise DraftError(f"llama_decode returned {code}")
        for seq_id, row in lasts.items():
            logits = np.ctypeslib.as_array(self.api.llama_get_logits_ith(self.ctx, row), shape=(self.n_vocab,))
            best[seq_id] = int(logits.argmax())

    def forget_all(self) -> None:
        self.api.llama_memory_clear(self.memory, True)
        self.cached.clear()

    def close(self) -> None:
        self.api.llama_batch_free(self.batch)
        self.llm.close()


def differs(api, draft, target) -> str | None:
    """Why the draft cannot draft for the target, in words; None when its tokens are the target's first ones.
    It may lack up to MAX_VOCAB_DIFFERENCE at the end (Qwen2.5-72B's padding to 152,064 beside 0.5B's 151,936);
    it may not have more, whose ids the target could not read."""
    ours, theirs = draft.n_vocab(), target.n_vocab()
    if not 0 <= theirs - ours <= MAX_VOCAB_DIFFERENCE:
        return (f"The draft model's vocabulary has {ours:,} tokens, the model's {theirs:,}: a draft must share the "
                "model's vocabulary.")
    mine, other = draft._model.vocab, target._model.vocab
    for token in range(ours):
        if api.llama_vocab_get_text(mine, token) != api.llama_vocab_get_text(other, token):
            return (f"The draft model's token {token} is {api.llama_vocab_get_text(mine, token)!r}, the model's "
                    f"{api.llama_vocab_get_text(other, token)!r}: a draft must share the model's vocabulary.")
    return None
