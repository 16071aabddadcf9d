"""Several generations on one model at once: continuous batching over llama.cpp's sequences.

A `Batcher` owns the context's `slots` sequences. Each decode step carries one
token for every sequence that is generating and, within what is left of the
step's token budget, a piece of the prompt of each sequence still reading one
(chunked prefill): a long prompt joining the batch is read between steps, and
the streams already running keep flowing. A sequence joins at the next step and
leaves as soon as it ends; nobody waits for anybody's answer to finish.

Each sequence samples with its own sampler chain, built as llama-cpp-python
builds one for `create_completion` (same samplers, order and defaults), so a
lone greedy job gives the tokens a single-process llama-cpp-python run gives.

A sequence's KV cache is kept after its job ends. The next job reuses the
longest prefix some free sequence already holds (a conversation's next turn
finds its previous turn there); if none holds one, a free sequence next to the
busy ones is cleared and taken (see `runs`), the one unused the longest among
them, so caches of recent jobs stay a while. Where another sequence, busy or
free, holds a longer prefix (a system prompt many requests share), it is copied
rather than read again (jobs/engine/kvcache.py).

A job that promises the same answer for the same request (a seed, or greedy:
`Work.reuse` False) may reuse any prefix where every stage computes on a CPU
(`any_shape`): the panel's llama.cpp gives a token the same numbers however its
step was shaped, alone or beside others, in one piece or several
(scripts/llama_patches/0005-one-row-as-many.patch; tests/jobs/engine/
test_one_row_as_many.py). A GPU's kernels are chosen by the step's shape, so
there such a job reuses only a prefix read in the very pieces its own prompt is
read in (jobs/engine/pieces.py): prompts are then read in pieces that end at
their turns, whatever is cached.
"""

import ctypes
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from jobs import structured
from jobs.engine import kvcache, logprobs, pieces
from jobs.engine.constrained import Constrained, Plain
from jobs.engine.drafting import DraftLength, NgramIndex
from jobs.engine.promptstore import PromptStore
from jobs.engine.stepcost import POSTPONE_MOST, StepCost
from jobs.engine.textout import TextOut

STEP_TOKENS = 512  # the context's n_batch: tokens one decode step may carry
PREFILL_BESIDE_OTHERS = 64  # prompt tokens a sequence reads per step while others are generating
# ...unless what is left of its prompt is this short: read whole, it costs the others' tokens less than one more
# step through the pipeline would (eight chat prompts of 65 tokens arriving together took two steps, the second
# for their last tokens, and their first tokens waited for both).
WHOLE_BESIDE_OTHERS = 2 * PREFILL_BESIDE_OTHERS
STORE_BYTES = 256 * 2**20  # the head's memory for prompts kept after their sequence went to another job
LAST_N = 64  # tokens the repeat penalty looks back over (llama-cpp-python's last_n_tokens_size)
MIN_P = 0.05  # llama-cpp-python's default for create_completion, which the engine used before


# In `Sequence.ends`: a piece read in a step of another shape than a read of it alone would have (llama.cpp
# splits a step of several sequences into ubatches of as many tokens from each, and a draft's rejected tokens
# shared the step): its keys and values are not what a fresh read in the plan's pieces computes (pieces.py).
INEXACT = -1


class DecodeError(RuntimeError):
    pass


@dataclass
class Work:
    """A job as the batcher sees it."""
    key: int  # the job's id
    prompt: list[int]
    params: dict
    stops: list[str]
    on_text: Callable[[str], None]
    limit: int  # most tokens it may generate (the context's room left)
    reuse: bool = True
    grammar: dict | None = None  # a chat layer's grammar (tool calls: models_app/llamacpp/chat.grammar_sampler)
    special: frozenset[int] = frozenset()  # special tokens shown as text (a model's tool-call markers)
    logprobs: int | None = None  # None: none; else how many likeliest others each token's entry lists
    on_logprob: Callable[[dict], None] | None = None
    cuts: tuple[int, ...] = ()  # where its prompt's pieces end, besides every STEP_TOKENS (jobs/engine/pieces.py)
    draft: bool = True  # drafts tokens when its batcher drafts (jobs/engine/drafting.py)


@dataclass
class Outcome:
    text: str = ""
    finish_reason: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reused_tokens: int = 0  # prompt tokens found already in the sequence's cache, not read again
    prompt_seconds: float | None = None
    first_token_at: float | None = None  # time.time()
    cancelled: bool = False
    pieces: list[str] = field(default_factory=list)
    logprobs: list[dict] | None = None  # one entry a token (jobs/engine/logprobs.py), when asked
    drafted: int = 0  # tokens drafted for it, and how many of those its steps kept
    accepted: int = 0
    trips: int = 0  # steps through the model that sampled for it


@dataclass
class Sequence:
    seq_id: int
    cached: list[int] = field(default_factory=list)  # tokens whose keys and values the context holds
    ends: list[int] = field(default_factory=list)  # where each piece of `cached` read in one step ended
    plan: list[int] = field(default_factory=list)  # where the pieces of its job's prompt end
    work: Work | None = None
    todo: list[int] = field(default_factory=list)  # prompt tokens not read yet
    last: int | None = None  # the token sampled last, not yet in the cache
    sampled: int | None = None  # the token sampled last, an end of generation included
    sampler: object = None
    out: TextOut | None = None
    outcome: Outcome | None = None
    started: float = 0.0
    freed: float = 0.0
    index: NgramIndex | None = None  # its tokens, for drafting
    length: DraftLength | None = None
    postponed: int = 0  # steps in a row its prompt's reading waited for shorter ones (jobs/engine/stepcost.py)

    @property
    def generating(self) -> bool:
        return self.work is not None and not self.todo


class Batcher:
    def __init__(self, llm, slots: int, draft_most: int = 0, any_shape: bool = False,
                 store_bytes: int = STORE_BYTES) -> None:
        import llama_cpp

        self.draft_most = draft_most  # most tokens a sequence drafts per step (0: none)
        self.draft_model = None  # a ModelDraft drafts instead of n-grams (jobs/engine/draft_model.py)
        self.any_shape = any_shape  # a token's numbers do not depend on its step's shape (jobs/engine/shapes.py)
        self.api, self.llm = llama_cpp, llm
        self.ctx = llm._ctx.ctx
        self.vocab = llm._model.vocab
        self.memory = llama_cpp.llama_get_memory(self.ctx)
        self.sequences = [Sequence(seq_id) for seq_id in range(slots)]
        self.batch = llama_cpp.llama_batch_init(STEP_TOKENS, 0, 1)
        self.eos = llm.token_eos()
        self.generated = 0  # tokens sampled since the engine started, over all sequences
        self.drafted = self.accepted = self.trips = 0  # likewise: tokens drafted, drafted tokens kept, steps sampled
        self.cost = StepCost()
        self.store = PromptStore(store_bytes)
        self.copying: set[int] = set()  # sequences in a copy llama.cpp makes at the next step (kvcache.copy)

    @property
    def busy(self) -> list[Sequence]:
        return [seq for seq in self.sequences if seq.work is not None]

    @property
    def free(self) -> int:
        return sum(seq.work is None for seq in self.sequences)

    def add(self, work: Work) -> Outcome:
        """Give the job a free sequence; it starts at the next step."""
        seq, reused = self._choose(work)
        source = max((other for other in self.sequences if other is not seq),
                     key=lambda other: self._reusable(other, work), default=None)
        shared = self._reusable(source, work) if source is not None else 0
        entry, stored = (None, 0) if seq.seq_id in self.copying else self.store.best(
            lambda tokens, ends: self._reusable_of(tokens, ends, work))
        dropped = len(seq.cached) - reused  # what it held beyond the job's prefix is about to go
        if dropped > 0 and seq.seq_id not in self.copying and self.store.worth_saving(
                len(seq.cached), self.cost.seconds(len(seq.cached), STEP_TOKENS)):
            self.store.save(self.api, self.ctx, seq)
        spared = stored - max(reused, shared)
        if entry is not None and spared >= kvcache.COPY_AT_LEAST and self.store.worth_restoring(
                entry, self.cost.seconds(spared, STEP_TOKENS)):
            restored = self.store.restore(self.api, self.ctx, entry, seq)
            reused = kvcache.keep(self.api, self.memory, seq, stored if restored else 0)
        elif shared >= reused + kvcache.COPY_AT_LEAST:  # another's cache (a busy one's too) holds more of it
            reused = kvcache.copy(self.api, self.memory, source, seq, shared)
            self.copying |= {source.seq_id, seq.seq_id}  # llama.cpp copies at the next step: neither is saved
        else:  # or written before then
            reused = kvcache.keep(self.api, self.memory, seq, reused)
        seq.plan = [] if self.any_shape else pieces.plan(len(work.prompt), work.cuts, STEP_TOKENS)
        seq.work, seq.todo, seq.last = work, work.prompt[reused:], None
        seq.sampler = self._sampler(work)
        seq.index = seq.length = None
        seq.postponed = 0
        # Where a step's shape changes a token's numbers, drafts would change a greedy or seeded answer.
        if self.draft_most and work.draft and (work.reuse or self.any_shape):
            seq.length = DraftLength(self.draft_most)
            seq.index = NgramIndex()  # also when a draft model drafts: it may be taken away mid-answer
            seq.index.add(work.prompt)
        seq.out = TextOut(work.stops)
        seq.outcome = Outcome(prompt_tokens=len(work.prompt), reused_tokens=reused)
        seq.started = time.monotonic()
        return seq.outcome

    def borrow(self) -> Sequence:
        """A free sequence for work outside the steps (jobs/engine/embedding.py): chosen as a job's would be when
        it reuses nothing."""
        return self._choose(None)[0]

    def _choose(self, work: Work | None) -> tuple[Sequence, int]:
        """The free sequence holding the longest prefix of the prompt that the job may reuse (at least one prompt
        token is always read again, for its logits); else one that keeps the busy sequences in as few runs of
        consecutive ids as can be (`runs`), and among those the one free the longest."""
        free = [seq for seq in self.sequences if seq.work is None]
        if not free:
            raise DecodeError("no free sequence")
        if work is not None:
            best = max(free, key=lambda seq: (self._reusable(seq, work), seq.freed))
            shared = self._reusable(best, work)
            if shared > 0:
                return best, shared
        busy = {seq.seq_id for seq in self.sequences if seq.work is not None}
        return min(free, key=lambda seq: (runs(busy | {seq.seq_id}), seq.freed)), 0

    def _reusable(self, seq: Sequence, work: Work) -> int:
        return self._reusable_of(seq.cached, seq.ends, work)

    def _reusable_of(self, cached: list[int], ends: list[int], work: Work) -> int:
        """How many tokens of a cache (its tokens, and where its pieces ended) the job may reuse."""
        shared = min(common_prefix(cached, work.prompt), len(work.prompt) - 1)
        if work.reuse or self.any_shape:
            return shared
        return pieces.exact_prefix(ends, pieces.plan(len(work.prompt), work.cuts, STEP_TOKENS), shared)

    def _sampler(self, work: Work):
        """The chain llama-cpp-python's `_init_sampler` builds for these parameters, and beside it the grammar
        that holds the answer, if any (jobs/engine/constrained.py)."""
        from llama_cpp import _internals

        params = work.params
        chain = _internals.LlamaSampler()
        chain.add_penalties(self.llm.n_vocab(), LAST_N, params["repeat_penalty"], 0.0, 0.0)
        temperature = params["temperature"]
        if temperature == 0.0:
            chain.add_greedy()
        else:
            seed = params.get("seed")
            chain.add_top_k(params["top_k"])
            chain.add_typical(1.0, 1)
            chain.add_top_p(params["top_p"], 1)
            chain.add_min_p(MIN_P, 1)
            chain.add_temp(temperature)
            chain.add_dist(seed if seed is not None else int.from_bytes(os.urandom(4)))
        spec = work.grammar or (params.get("response_format") and
                                {"grammar": structured.grammar_of(params["response_format"]["schema"])})
        if not spec:
            return Plain(chain)
        return Constrained(self.api, chain, self._grammar(spec), self.llm.n_vocab())

    def _grammar(self, spec: dict):
        from models_app.llamacpp import chat

        made = chat.grammar_sampler(self.llm._model.model, spec)
        return ctypes.cast(made, self.api.llama_sampler_p_ctypes)

    def step(self) -> list[tuple[int, Outcome]]:
        """One decode step over every busy sequence; the jobs that ended in it (key and outcome; their sequences
        are free again)."""
        rows = self._fill()
        if not self.batch.n_tokens:  # a step reading only a prompt piece samples nothing, but is still computed
            return []
        began = time.perf_counter()
        code = self.api.llama_decode(self.ctx, self.batch)
        self.cost.observe(self.batch.n_tokens, time.perf_counter() - began)
        self.copying.clear()
        if code != 0:
            raise DecodeError(f"llama_decode returned {code}")
        ended = []
        for seq, row, drafts in rows:
            key = seq.work.key
            if self._verify(seq, row, drafts):
                ended.append((key, seq.outcome))
        return ended

    def _fill(self) -> list[tuple[Sequence, int, list[int]]]:
        """Put this step's tokens in the batch: for every generating sequence its last token and its draft, then
        prompt pieces. Returns the sequences that sample after the step, with the row of their first logits and
        the tokens they drafted."""
        batch, n, rows = self.batch, 0, []
        generating = [seq for seq in self.sequences if seq.generating]
        drafted = self._drafts(generating, STEP_TOKENS // max(len(generating), 1) - 1)
        # llama.cpp reads a step in one pass only where every sequence brings as many tokens (split_equal): with
        # several generating, all draft as many as the one that drafts least, or none.
        common = min(map(len, drafted), default=0)
        for seq, drafts in zip(generating, drafted, strict=True):
            drafts = drafts[:common]
            n = self._put(n, seq, [seq.last, *drafts], logits_from=0)
            rows.append((seq, n - 1 - len(drafts), drafts))
        stepping = list(generating)
        for seq, planned in self._reading_now(n, bool(generating)):
            room = STEP_TOKENS - n
            if room <= 0:
                break
            piece = min(room, planned)
            tokens, seq.todo = seq.todo[:piece], seq.todo[piece:]
            n = self._put(n, seq, tokens, logits_from=None if seq.todo else len(tokens) - 1)
            stepping.append(seq)
            if not seq.todo:
                rows.append((seq, n - 1, []))
        batch.n_tokens = n
        if len(stepping) > 1:
            for seq in stepping:
                seq.ends[-1] = INEXACT
        return rows

    def _reading_now(self, tokens: int, generating: bool) -> list[tuple[Sequence, int]]:
        """The sequences whose prompts this step reads, in id order, each with the piece it reads (room allowing):
        the shortest reads first where the steps so far say that is sooner for most (jobs/engine/stepcost.py)."""
        reading = [seq for seq in self.sequences if seq.work is not None and seq.todo]
        pieces = {seq.seq_id: self._prompt_piece(seq, generating) for seq in reading}
        if len(reading) < 2:
            return [(seq, pieces[seq.seq_id]) for seq in reading]
        order = sorted(reading, key=lambda seq: (seq.postponed < POSTPONE_MOST, pieces[seq.seq_id]))
        due = sum(seq.postponed >= POSTPONE_MOST for seq in reading)
        now = {seq.seq_id for seq in order[:self.cost.take(tokens, [pieces[seq.seq_id] for seq in order], due)]}
        for seq in reading:
            seq.postponed = 0 if seq.seq_id in now else seq.postponed + 1
        return [(seq, pieces[seq.seq_id]) for seq in reading if seq.seq_id in now]

    def _prompt_piece(self, seq: Sequence, generating: bool) -> int:
        """The prompt tokens a reading sequence reads in a step, room allowing: up to the end of its plan's piece,
        and beside running answers a short rest whole, else PREFILL_BESIDE_OTHERS."""
        at = len(seq.cached)
        planned = next((end for end in seq.plan if end > at), at + len(seq.todo)) - at
        most = STEP_TOKENS if not generating or len(seq.todo) <= WHOLE_BESIDE_OTHERS else PREFILL_BESIDE_OTHERS
        return min(planned, most)

    def _drafts(self, generating: list[Sequence], room: int) -> list[list[int]]:
        mosts = [self._most(seq, room) for seq in generating]
        if min(mosts, default=0) <= 0:
            return [[] for _ in generating]
        if self.draft_model is not None and not self.draft_model.broken:
            return self.draft_model.draft([(seq.seq_id, [*seq.cached, seq.last], most)
                                           for seq, most in zip(generating, mosts, strict=True)])
        drafted = [seq.index.draft(most) for seq, most in zip(generating, mosts, strict=True)]
        # A sequence whose n-grams found nothing would hold every other one's draft back (above): it guesses
        # the rest from its shorter n-grams instead, which costs a few rows of a step that is made anyway.
        longest = max(map(len, drafted))
        return [draft if len(draft) >= min(longest, most) else seq.index.padded(draft, min(longest, most))
                for seq, draft, most in zip(generating, drafted, mosts, strict=True)]

    @staticmethod
    def _most(seq: Sequence, room: int) -> int:
        if seq.length is None:
            return 0
        return min(seq.length.now, seq.work.limit - seq.outcome.completion_tokens - 1, room)

    def _put(self, n: int, seq: Sequence, tokens: list[int], logits_from: int | None) -> int:
        batch, pos = self.batch, len(seq.cached)
        for i, token in enumerate(tokens):
            batch.token[n] = token
            batch.pos[n] = pos + i
            batch.n_seq_id[n] = 1
            batch.seq_id[n][0] = seq.seq_id
            batch.logits[n] = logits_from is not None and i >= logits_from
            n += 1
        seq.cached.extend(tokens)
        seq.ends.append(len(seq.cached))
        return n

    def _verify(self, seq: Sequence, row: int, drafts: list[int]) -> bool:
        """Sample the rows of a sequence's step in turn, keeping each drafted token the sample equals, up to the
        first it does not (its sample takes its place); the cache forgets the drafted tokens not kept. True when
        the job ended."""
        outcome, start = seq.outcome, len(seq.cached) - len(drafts)  # where the draft sits in the cache
        outcome.trips += 1
        self.trips += 1
        kept, ended = 0, False
        for i in range(len(drafts) + 1):
            ended = self._sample(seq, row + i)
            if i < len(drafts) and seq.sampled == drafts[i]:
                kept += 1
            if ended or i == len(drafts) or seq.sampled != drafts[i]:
                break
        if drafts:
            outcome.drafted, outcome.accepted = outcome.drafted + len(drafts), outcome.accepted + kept
            self.drafted, self.accepted = self.drafted + len(drafts), self.accepted + kept
            if not ended:
                seq.length.kept(len(drafts), kept)
        if kept < len(drafts):
            self.api.llama_memory_seq_rm(self.memory, seq.seq_id, start + kept, -1)
            del seq.cached[start + kept:]
            seq.ends[-1:] = [INEXACT]
        return ended

    def _sample(self, seq: Sequence, row: int) -> bool:
        """Sample the sequence's next token from its logits; True when its job ended."""
        outcome, work = seq.outcome, seq.work
        if outcome.completion_tokens == 0 and outcome.prompt_seconds is None:
            outcome.prompt_seconds = time.monotonic() - seq.started
        token = seq.sampled = seq.sampler.sample(self.api, self.ctx, row)
        if self.api.llama_vocab_is_eog(self.vocab, token):
            return self._end(seq, "stop")
        seq.last = token
        if seq.index is not None:
            seq.index.add([token])
        outcome.completion_tokens += 1
        self.generated += 1
        if work.logprobs is not None:
            self._logprob(seq, row, token)
        self._give(seq, seq.out.add(self._piece(token, token in work.special)))
        if seq.out.stopped:
            return self._end(seq, "stop", finished=True)
        if outcome.completion_tokens >= work.limit:
            return self._end(seq, "length")
        return False

    def _logprob(self, seq: Sequence, row: int, token: int) -> None:
        work = seq.work
        found = logprobs.entry(self.api, self.ctx, row, self.llm.n_vocab(), token, work.params["temperature"],
                               work.logprobs, lambda other: self._piece(other, other in work.special))
        if seq.outcome.logprobs is None:
            seq.outcome.logprobs = []
        seq.outcome.logprobs.append(found)
        if work.on_logprob:
            work.on_logprob(found)

    def _piece(self, token: int, special: bool = False) -> bytes:
        buffer = ctypes.create_string_buffer(64)
        size = self.api.llama_token_to_piece(self.vocab, token, buffer, len(buffer), 0, special)
        if size < 0:  # a longer piece: ask again with room for it
            buffer = ctypes.create_string_buffer(-size)
            size = self.api.llama_token_to_piece(self.vocab, token, buffer, len(buffer), 0, special)
        return buffer.raw[:size]

    def _give(self, seq: Sequence, pieces: list[str]) -> None:
        outcome = seq.outcome
        for text in pieces:
            if outcome.first_token_at is None:
                outcome.first_token_at = time.time()
            outcome.pieces.append(text)
            seq.work.on_text(text)

    def _end(self, seq: Sequence, reason: str, finished: bool = False) -> bool:
        if not finished:
            self._give(seq, seq.out.finish())
        seq.outcome.finish_reason = reason
        self.release(seq)
        return True

    def cancel(self, seq: Sequence) -> Outcome:
        """End a sequence's job now, keeping what it made."""
        outcome = seq.outcome
        outcome.cancelled, outcome.finish_reason = True, "cancelled"
        self.release(seq)
        return outcome

    def release(self, seq: Sequence) -> None:
        seq.outcome.text = "".join(seq.outcome.pieces)
        if seq.todo:  # ended while still reading its prompt: what was read is kept, the rest never was
            seq.todo = []
        seq.work, seq.sampler, seq.out, seq.last = None, None, None, None
        seq.freed = time.monotonic()

    def forget_all(self) -> None:
        """Clear every sequence's cache, and the prompts kept in memory (the next jobs read their prompts whole:
        after a failed step nothing cached is trusted)."""
        self.api.llama_memory_clear(self.memory, True)
        self.copying.clear()
        self.store.clear()
        for seq in self.sequences:
            seq.cached, seq.ends = [], []


def runs(seq_ids: set[int]) -> int:
    """Runs of consecutive ids: {0, 1, 2} is one, {0, 2, 3} two. With one KV stream per sequence, llama.cpp
    computes a step's tokens in one pass only for consecutive sequence ids (llama_batch_allocr::split_equal,
    sequential); each further run is another pass through every laptop, which costs as much as the first."""
    return sum(1 for seq_id in seq_ids if seq_id - 1 not in seq_ids)


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
