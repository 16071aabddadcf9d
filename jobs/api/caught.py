"""A stream that follows a retry (a laptop died under its answer) against what its client already has: the retry's
text is sent only where it goes on from there, and one that says something else is found out and ended in words.
"""

from jobs.models import JobStatus


class Caught:
    """A retry's text against what the client already got of the failed attempt: what it has is not sent again,
    and a retry that says something else is found out (`new` gives None). Greedy and seeded requests give the
    same text again, mostly (docs/benchmarks.md, "Batched kernels and greedy answers"); sampled ones do not."""

    def __init__(self, sent: str) -> None:
        self.sent, self.made = sent, ""

    def new(self, text: str) -> str | None:
        before = len(self.made)
        self.made += text
        if len(self.made) <= len(self.sent):
            return "" if self.sent.startswith(self.made) else None
        return self.made[max(before, len(self.sent)):] if self.made.startswith(self.sent) else None


def text_parted(event: dict, caught: Caught) -> bool:
    """The stream stopped on a token the client cannot be given, or its retry ended on other text than was sent."""
    if event.get("event") != "done":
        return True
    output = event.get("output") or ""
    return bool(caught.sent) and event.get("status") == JobStatus.SUCCEEDED and not output.startswith(caught.sent)


PARTED = ("A laptop or the engine failed in the middle of this answer and its retry said something else than what "
          "was already sent (a sampled answer is not given twice), so the answer stops here. Send the request "
          "again, or send it with temperature 0 or a seed to be given the rest.")
