"""A stream that follows a retry (a laptop died under its answer) against what its client already has: the retry's
text and tool calls are sent only where they go on from there, and one that says something else is found out and
ended in words.
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


    @property
    def behind(self) -> bool:
        """The retry is still saying what the client has (its logprobs, too, were sent with the first attempt)."""
        return bool(self.sent) and len(self.made) <= len(self.sent)


class CaughtCalls:
    """The same for tool calls, by index: a call the client has (its id and name, and its arguments so far) is not
    sent again; the retry's call goes on with the arguments' rest, under the id the client already has, and a call
    of another name or other arguments is found out (`new` gives None). A call the client has none of is sent as
    it comes."""

    def __init__(self, sent: dict[int, dict]) -> None:
        self.sent = {index: dict(call) for index, call in sent.items()}
        self.made: dict[int, dict] = {}

    def new(self, delta: dict) -> dict | None:
        index = delta["index"]
        made = sent_call(self.made, delta)
        sent = self.sent.get(index)
        if sent is None:
            return delta
        if made["name"] != sent["name"]:
            return None
        arguments, had = made["arguments"], sent["arguments"]
        if len(arguments) <= len(had):
            return {} if had.startswith(arguments) else None
        if not arguments.startswith(had):
            return None
        before = len(arguments) - len(delta.get("arguments", ""))
        return {"index": index, "arguments": arguments[max(before, len(had)):]}

    def parted(self, calls: list[dict]) -> bool:
        """The retry ended without a call the client has, or with one that says something else."""
        for index, sent in self.sent.items():
            if index >= len(calls):
                return True
            function = calls[index]["function"]
            if function["name"] != sent["name"] or not function["arguments"].startswith(sent["arguments"]):
                return True
        return False


def sent_call(calls: dict[int, dict], delta: dict) -> dict:
    """A call's delta added to what is had of it (the client's calls, or a retry's so far); the call as it now is."""
    call = calls.setdefault(delta["index"], {"name": "", "arguments": ""})
    call["name"] += delta.get("name", "")
    call["arguments"] += delta.get("arguments", "")
    return call


def text_parted(event: dict, caught: Caught, calls: CaughtCalls | None = None) -> bool:
    """The stream stopped on a token or call the client cannot be given, or its retry ended on other text or
    other calls than were sent."""
    if event.get("event") != "done":
        return True
    if event.get("status") != JobStatus.SUCCEEDED:
        return False
    output = event.get("output") or ""
    return (bool(caught.sent) and not output.startswith(caught.sent)) or bool(
        calls and calls.parted(event.get("tool_calls") or []))


PARTED = ("A laptop or the engine failed in the middle of this answer and its retry said something else than what "
          "was already sent (a sampled answer is not given twice), so the answer stops here. Send the request "
          "again, or send it with temperature 0 or a seed to be given the rest.")
