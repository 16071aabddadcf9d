"""How a prompt is read: in pieces that end at its turns, so that a cached prefix is reused without changing an
answer.

llama.cpp's numbers for a token depend on the shape of the step that read it: a prompt read in other pieces
gives slightly other keys and values, and now and then another answer (issue 11). So a request that promises
the same answer for the same request (greedy, or with a seed) reuses a prefix only if that prefix was read in
the very pieces a fresh read of its own prompt reads it in. A prompt's pieces depend on the prompt alone: they
end where its chat template's preamble ends (what every request with this first role shares: the template's
default system prompt, say), where each earlier answer of the conversation begins, and every `most` tokens
after one of those. A conversation's next turn therefore finds its earlier turns, and any request the shared
preamble, read exactly as it would read them itself; a single question costs one step more than a read in one
piece (the preamble), and none once the preamble is cached.
"""

from collections.abc import Callable, Sequence


def plan(length: int, cuts: Sequence[int], most: int) -> list[int]:
    """The ends of the pieces a prompt of `length` tokens is read in when it reads alone: at each cut, and every
    `most` tokens after the start or a cut."""
    ends, start = [], 0
    for cut in sorted({c for c in cuts if 0 < c < length} | {length}):
        ends.extend(range(start + most, cut, most))
        ends.append(cut)
        start = cut
    return ends


def exact_prefix(read_ends: Sequence[int], planned: Sequence[int], shared: int) -> int:
    """Of `shared` tokens a sequence holds in common with a prompt, how many were read in the pieces the prompt's
    plan reads them in (the ends of the pieces read, `read_ends`, are the plan's up to there)."""
    exact = 0
    for done, wanted in zip(read_ends, planned, strict=False):
        if done != wanted or wanted > shared:
            break
        exact = wanted
    return exact


def turn_cuts(render: Callable[[list[dict], bool], str], tokenize: Callable[[str, bool], list[int]],
              messages: list[dict], text: str, tokens: list[int]) -> tuple[int, ...]:
    """Where the chat prompt `tokens` (the template's `text` for `messages`) is cut: after the template's
    preamble, and where each assistant message's own words begin (after its header, which is the prompt the
    template ends with when it asks for an answer). So a conversation's next turn is cut where the answer of
    the turn before began: what that turn read is one of its pieces. `render(some, answer)` gives the template's
    text for some messages, with the prompt for the answer or without; `tokenize(text, first)` a piece's tokens.
    A cut is kept only where the pieces' tokens put together are the prompt's own; none when the template will
    not render part of a conversation."""
    prefixes = []
    try:
        first = messages[0]
        if isinstance(first.get("content"), str) and first["content"]:
            prefixes.append(shared_start(render([first], False), render([{**first, "content": ""}], False)))
        for count, message in enumerate(messages):
            if count and message.get("role") == "assistant":
                asking = render(messages[:count], True)
                if render(messages[:count + 1], False).startswith(asking):
                    prefixes.append(asking)
    except Exception:  # noqa: BLE001 - a template may refuse a part (roles must alternate): no cuts, read whole
        return ()
    offsets = sorted({len(p) for p in prefixes if 0 < len(p) < len(text) and text.startswith(p)})
    cuts, pieces, start = [], [], 0
    for offset in [*offsets, len(text)]:
        pieces.extend(tokenize(text[start:offset], start == 0))
        cuts.append(len(pieces))
        start = offset
    return tuple(cuts[:-1]) if pieces == tokens else ()


def shared_start(a: str, b: str) -> str:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return a[:n]
