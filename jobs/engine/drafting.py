"""Drafts for speculative decoding: tokens a sequence will likely write next, guessed for nothing, which one step
through the pipeline then verifies together (jobs/engine/sequences.py).

N-gram drafting (llama.cpp's `ngram-simple`, "prompt lookup"): the last few tokens of a sequence (its prompt and
its answer so far) seen before in it are likely followed by what followed them there. A summary quotes its
text, an edited file repeats most of the file, a list repeats its own shape. Guessing costs a dictionary look-up
per token; a wrong guess costs only the rows it took in the verifying step.

The draft is deterministic, so verifying by sampling each row from the target's own chain and keeping the
drafted token only where the sample equals it leaves the target's distribution exactly as it is (a drafted
token is kept with the target's probability of it, and a rejected one is replaced by a sample of the target's
distribution without it): the standard rejection rule for a one-hot draft.
"""

from dataclasses import dataclass, field

LONGEST, SHORTEST = 4, 2  # the n-grams looked up, longest first: a longer match predicts better


@dataclass
class NgramIndex:
    """Where each n-gram of a sequence's tokens last ended, kept up to date token by token."""
    tokens: list[int] = field(default_factory=list)
    seen: dict[tuple[int, ...], int] = field(default_factory=dict)  # n-gram → index just after its last end

    def add(self, tokens: list[int]) -> None:
        for token in tokens:
            self.tokens.append(token)
            end = len(self.tokens)
            for n in range(1, LONGEST + 1):  # 1-grams only pad (`padded`)
                if end - 1 >= n:  # the n-gram ending just before this token: followed by it
                    self.seen[tuple(self.tokens[end - 1 - n:end - 1])] = end - 1

    def draft(self, most: int) -> list[int]:
        """Up to `most` tokens that followed the longest tail n-gram the last time it was seen; [] if none was."""
        return self._follow(self.tokens[-LONGEST:], most, SHORTEST) if most > 0 else []

    def padded(self, draft: list[int], length: int) -> list[int]:
        """`draft` guessed on to `length` tokens: what followed the longest tail of the sequence and draft seen
        before (down to its last token alone), and where nothing was, that token again."""
        made = list(draft)
        while len(made) < length:
            tail = (self.tokens[-LONGEST:] + made)[-LONGEST:]
            more = self._follow(tail, length - len(made), 1) or tail[-1:] or [0]
            made += more
        return made[:length]

    def _follow(self, tail: list[int], most: int, shortest: int) -> list[int]:
        for n in range(min(LONGEST, len(tail)), shortest - 1, -1):
            after = self.seen.get(tuple(tail[-n:]))
            if after is not None:
                return self.tokens[after:after + most]
        return []


@dataclass
class DraftLength:
    """How many tokens a sequence drafts next: more after a step that kept all it drafted, fewer after one that
    kept few, so a sequence whose guesses fail stops paying for them."""
    most: int
    now: int = 2

    def __post_init__(self) -> None:
        self.now = min(self.now, self.most)

    def kept(self, drafted: int, accepted: int) -> None:
        if not drafted:
            return
        if accepted == drafted:
            self.now = min(self.now + 2, self.most)
        else:
            self.now = max(accepted + 1, 1)
