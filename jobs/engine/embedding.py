"""Texts into vectors on the loaded model, between two of the batcher's decode steps.

A model made for embeddings (a GGUF whose `pooling_type` says mean, CLS or last)
is pooled by llama.cpp as it says. A chat model has no pooling of its own: its
vector is the mean of its last layer's normed states over the input's tokens,
which is what llama.cpp's `--pooling mean` gives. Either way the vector is scaled
to length 1, as OpenAI's are, so a dot product is the cosine.

Each input is read alone on a free sequence whose cache is cleared before and
after, in decode calls of its own: its vector does not depend on what else the
engine runs, and the streams beside it wait only that long.
"""

import base64
from collections.abc import Callable

import numpy as np

from jobs.engine.sequences import STEP_TOKENS, DecodeError, Sequence
from models_app.gguf.meta import POOLING_NONE, POOLING_RANK

MEAN_CHUNK = 128  # tokens a decode call reads when pooling here: each is an output row, logits and all, on the head


class EmbeddingError(ValueError):
    pass


def encoded(vector: np.ndarray) -> str:
    """OpenAI's base64 encoding: the float32 values, little-endian."""
    return base64.b64encode(vector.astype("<f4").tobytes()).decode()


def decoded(text: str) -> list[float]:
    return np.frombuffer(base64.b64decode(text), dtype="<f4").astype(float).tolist()


class Embedder:
    """The vectors of token lists, on the batcher's context and one of its free sequences."""

    def __init__(self, batcher) -> None:
        self.batcher, self.api, self.ctx = batcher, batcher.api, batcher.ctx
        self.n_embd = batcher.llm.n_embd()
        self.pooling = self.api.llama_pooling_type(self.ctx)

    def vectors(self, inputs: list[list[int]], each: Callable[[int], None] = lambda done: None) -> list[np.ndarray]:
        if self.pooling == POOLING_RANK:
            raise EmbeddingError("This model ranks documents (a reranker); it makes no embeddings.")
        seq = self.batcher.borrow()
        found = []
        self.api.llama_set_embeddings(self.ctx, True)
        try:
            for tokens in inputs:
                self._clear(seq)
                vector = self._pooled(seq, tokens) if self.pooling != POOLING_NONE else self._mean(seq, tokens)
                norm = float(np.linalg.norm(vector))
                found.append(vector / norm if norm > 0 else vector)
                each(len(found))
        finally:
            self.api.llama_set_embeddings(self.ctx, False)
            self._clear(seq)
        return found

    def _mean(self, seq: Sequence, tokens: list[int]) -> np.ndarray:
        total = np.zeros(self.n_embd, dtype=np.float64)
        for start in range(0, len(tokens), MEAN_CHUNK):
            piece = tokens[start:start + MEAN_CHUNK]
            self._decode(seq, piece, start)
            for row in range(len(piece)):
                total += self._row(self.api.llama_get_embeddings_ith(self.ctx, row))
        return (total / max(len(tokens), 1)).astype(np.float32)

    def _pooled(self, seq: Sequence, tokens: list[int]) -> np.ndarray:
        if len(tokens) > STEP_TOKENS:  # llama.cpp pools one micro-batch: a longer input would be cut
            raise EmbeddingError(f"An input has {len(tokens)} tokens; this embedding model reads at most "
                                 f"{STEP_TOKENS} at once. Split it.")
        self._decode(seq, tokens, 0)
        return self._row(self.api.llama_get_embeddings_seq(self.ctx, seq.seq_id)).astype(np.float32)

    def _row(self, pointer) -> np.ndarray:
        if not pointer:
            raise EmbeddingError("llama.cpp gave no embedding for this input.")
        return np.ctypeslib.as_array(pointer, shape=(self.n_embd,)).astype(np.float64)

    def _decode(self, seq: Sequence, tokens: list[int], position: int) -> None:
        batch = self.batcher.batch
        for i, token in enumerate(tokens):
            batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, position + i, 1
            batch.seq_id[i][0], batch.logits[i] = seq.seq_id, True
        batch.n_tokens = len(tokens)
        code = self.api.llama_decode(self.ctx, batch)
        if code != 0:
            raise DecodeError(f"llama_decode returned {code}")

    def _clear(self, seq: Sequence) -> None:
        self.api.llama_memory_seq_rm(self.batcher.memory, seq.seq_id, 0, -1)
        seq.cached, seq.ends = [], []
