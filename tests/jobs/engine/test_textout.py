"""A sequence's tokens become the text pieces a listener sees (jobs/engine/textout.py): one piece per token, a character
split between tokens given out whole, text that may begin a stop string held until it is known, and nothing
from a stop string on."""

from hypothesis import given
from hypothesis import strategies as st

from jobs.engine.textout import TextOut, incomplete_tail


def stream(pieces: list[bytes], stops: list[str]) -> tuple[list[str], bool]:
    out, text = [], TextOut(stops)
    for piece in pieces:
        out += text.add(piece)
        if text.stopped:
            return out, True
    return out + text.finish(), False


def test_each_token_is_a_piece_of_its_own():
    assert stream([b"Hel", b"lo", b",", b" world"], []) == (["Hel", "lo", ",", " world"], False)


def test_a_character_split_between_tokens_comes_out_whole():
    face = "😀".encode()
    assert stream([b"a", face[:2], face[2:], b"b"], []) == (["a", "😀", "b"], False)
    assert incomplete_tail(face[:3]) and incomplete_tail("é".encode()[:1]) and not incomplete_tail(face)


def test_text_that_may_begin_a_stop_is_held_and_the_stop_is_never_shown():
    assert stream([b"Hello", b" <", b"|im", b"_end|>", b"more"], ["<|im_end|>"]) == (["Hello", " "], True)
    assert stream([b"go S", b"T", b"x"], ["STOP"]) == (["go S", "T", "x"], False), "held, then let go"


def test_the_end_gives_out_what_was_held():
    assert stream([b"a", b"S", b"T"], ["STOP"]) == (["a", "S", "T"], False)


@given(st.lists(st.text(min_size=1, max_size=4), max_size=12), st.sampled_from(["", "STOP", "\n\n", "é!"]))
def test_the_pieces_are_the_text_up_to_the_first_stop(texts, stop):
    whole = "".join(texts)
    pieces, stopped = stream([text.encode() for text in texts], [stop] if stop else [])
    expected = whole[:whole.index(stop)] if stop and stop in whole else whole
    assert "".join(pieces) == expected
    assert stopped == bool(stop and stop in whole)
