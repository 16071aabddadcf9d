"""Prompts kept in the head's memory after their sequence is given to another job, as llama-server's prompt cache
(`--cache-ram`) keeps them: a conversation whose slot someone else took, or a request a lab sends again, gets
its keys and values back instead of reading its prompt again through every laptop.

Saving and writing back cost time too, and everyone's stream waits for them. Without flash attention llama.cpp
keeps a layer's values transposed and reads or writes them one row at a time: over laptops that is thousands of
round trips (193 tokens took 1.4 s to save over the simulated LAN, against 16 ms a token to read a prompt). So the
store times its own work, a token's save or write-back, and saves only while saving and writing back a cache
costs under a quarter of reading it again (most saved prompts never come back), and writes one back only where
that costs less than reading the tokens it spares, by what the engine's steps cost (jobs/engine/stepcost.py);
the first save measures it. Even that one save (1.4 s, holding every stream) cost more than the store gave back
over the simulated laptops (bench/concurrency.py: one client's first token 2.0 s against 0.6 s without it), so
engines with laptops keep no store (jobs/engine/child.py) until the engine computes attention with flash
attention, where a layer's values are read in one piece.

A sequence's cache is saved (llama.cpp's `llama_state_seq_get_data`: its cells and their keys and values, read
from the devices that hold each layer) when a new job is about to drop what it holds, and a new job whose prompt
a saved one begins better than any sequence does gets it written back (`llama_state_seq_set_data`). The numbers
are the ones computed then, so a restored prefix changes no token where a cached one would not (the batcher's
rules for what a greedy or seeded job may reuse apply to the saved pieces as to a sequence's own). The least
recently used go first past `capacity` bytes (settings.ENGINE_PROMPT_CACHE_MIB).
"""

import ctypes
import time
from dataclasses import dataclass, field

SAVE_AT_LEAST = 32  # tokens a sequence must hold for its cache to be worth saving


@dataclass
class Saved:
    tokens: list[int]
    ends: list[int]
    state: ctypes.Array
    used: float = field(default_factory=time.monotonic)


WORTH_SAVING = 0.25  # of a token's read: what a token's save and write-back may cost


class PromptStore:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.saved: list[Saved] = []
        self.saves = self.restores = 0
        self.per_token: float | None = None  # seconds a token's save (or write-back) took, lately

    def worth_saving(self, tokens: int, read_seconds: float | None) -> bool:
        """Whether to save a cache of `tokens` tokens that would take `read_seconds` to read again (None: not
        known yet)."""
        return self.per_token is None or read_seconds is None or (
            2 * self.per_token * tokens < WORTH_SAVING * read_seconds)

    def worth_restoring(self, entry: Saved, read_seconds: float | None) -> bool:
        """Whether writing the entry back costs less than reading what it spares (`read_seconds`)."""
        return self.per_token is None or read_seconds is None or self.per_token * len(entry.tokens) < read_seconds

    def _timed(self, began: float, tokens: int) -> None:
        took = (time.perf_counter() - began) / max(tokens, 1)
        self.per_token = took if self.per_token is None else 0.7 * self.per_token + 0.3 * took

    @property
    def size(self) -> int:
        return sum(len(entry.state) for entry in self.saved)

    def save(self, api, ctx, seq) -> bool:
        """Keep what the sequence's cache holds (before it is given to another job); False when not worth it or
        it does not fit."""
        tokens = seq.cached
        if self.capacity <= 0 or len(tokens) < SAVE_AT_LEAST:
            return False
        if any(entry.tokens[:len(tokens)] == tokens for entry in self.saved):
            return False  # already kept, whole or as the start of a longer one
        size = api.llama_state_seq_get_size(ctx, seq.seq_id)
        if not size or size > self.capacity:
            return False
        state = (ctypes.c_uint8 * size)()
        began = time.perf_counter()
        if api.llama_state_seq_get_data(ctx, state, size, seq.seq_id) != size:
            return False
        self._timed(began, len(tokens))
        # what this one begins with, kept before, it holds too
        self.saved = [entry for entry in self.saved if tokens[:len(entry.tokens)] != entry.tokens]
        self.saved.append(Saved(list(tokens), list(seq.ends), state))
        while self.size > self.capacity:
            self.saved.remove(min(self.saved, key=lambda entry: entry.used))
        self.saves += 1
        return True

    def best(self, reusable) -> tuple[Saved | None, int]:
        """The saved prompt of which the job may reuse the most (`reusable(tokens, ends)` says how many tokens),
        and that count."""
        found, most = None, 0
        for entry in self.saved:
            count = reusable(entry.tokens, entry.ends)
            if count > most:
                found, most = entry, count
        return found, most

    def restore(self, api, ctx, entry: Saved, seq) -> bool:
        """Write the saved cache into the sequence (whatever it held goes); the caller then keeps the prefix it
        reuses. False when llama.cpp could not (the sequence is then empty)."""
        began = time.perf_counter()
        if api.llama_state_seq_set_data(ctx, entry.state, len(entry.state), seq.seq_id) != len(entry.state):
            seq.cached, seq.ends = [], []
            return False
        self._timed(began, len(entry.tokens))
        seq.cached, seq.ends = list(entry.tokens), list(entry.ends)
        entry.used = time.monotonic()
        self.restores += 1
        return True

    def clear(self) -> None:
        self.saved = []
