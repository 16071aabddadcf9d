"""Which prompts a decode step finishes first, from what the engine's own steps cost.

A sequence gives its first token at the end of the step that reads its prompt's last piece, so prompts read
together give their first tokens together, at the end of the biggest step. Whether reading them one step after
another is better depends on the laptops. Where a step's time grows with its tokens (compute-bound: the
simulated laptops here, where eight 34-token reads in one step took 3.4 s), the shortest read first
lets most people start sooner. Where a step costs a trip through the pipeline whatever it carries
(memory-bound real laptops, where every step reads all the weights once), one more step costs everyone a trip,
and reading everything together is best.

`StepCost` fits time = per_step + per_token × tokens over the engine's recent steps (least squares) and picks,
each step, how many of the shortest waiting reads to take so that the readers' mean time to a first token, over
this step and the next, is least. Until the steps have shown a cost that grows with tokens, every read goes in
(the behaviour before). A read left out for POSTPONE_MOST steps in a row goes in next, so a long prompt behind
a stream of short ones still starts.
"""

from collections import deque

KEEP = 64  # recent steps the fit reads
FIT_AFTER = 8  # steps seen before the fit is trusted
POSTPONE_MOST = 3


class StepCost:
    def __init__(self) -> None:
        self.seen: deque[tuple[int, float]] = deque(maxlen=KEEP)

    def observe(self, tokens: int, seconds: float) -> None:
        if tokens > 0 and seconds > 0:
            self.seen.append((tokens, seconds))

    def fit(self) -> tuple[float, float] | None:
        """(seconds per step, seconds per token), or None while the steps have not shown tokens to cost."""
        if len(self.seen) < FIT_AFTER:
            return None
        sizes = [n for n, _ in self.seen]
        if max(sizes) < 2 * min(sizes) or max(sizes) - min(sizes) < 4:
            return None  # steps of one size say nothing about what a token adds
        count = len(self.seen)
        mean_n = sum(sizes) / count
        mean_t = sum(t for _, t in self.seen) / count
        spread = sum((n - mean_n) ** 2 for n in sizes)
        per_token = sum((n - mean_n) * (t - mean_t) for n, t in self.seen) / spread
        if per_token <= 0:
            return None
        return max(mean_t - per_token * mean_n, 0.0), per_token

    def seconds(self, tokens: int, per_step_most: int) -> float | None:
        """About how long reading `tokens` prompt tokens takes, in steps of at most `per_step_most`; None while
        not known."""
        fitted = self.fit()
        if fitted is None:
            return None
        per_step, per_token = fitted
        return per_step * -(-tokens // per_step_most) + per_token * tokens

    def take(self, generating: int, pieces: list[int], at_least: int = 1) -> int:
        """How many of the reads, in order (`pieces`: tokens each reads in this step; shortest first, after the
        `at_least` that must go in now), to read now beside `generating` tokens of running answers; the rest
        wait for the next step."""
        readers, fitted = len(pieces), self.fit()
        if readers < 2 or fitted is None:
            return readers
        per_step, per_token = fitted
        total, best, best_k = sum(pieces), None, readers
        now = sum(pieces[:at_least - 1])
        for k in range(max(at_least, 1), readers + 1):
            now += pieces[k - 1]
            first = per_step + per_token * (generating + now)
            if k == readers:
                waited = readers * first
            else:  # those read now generate beside the rest in the next step
                second = per_step + per_token * (generating + k + total - now)
                waited = k * first + (readers - k) * (first + second)
            if best is None or waited <= best:  # a tie: fewer steps
                best, best_k = waited, k
        return best_k
