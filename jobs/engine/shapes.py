"""Whether a loaded model gives a token the same numbers however the step that read it was shaped: measured once
at load, on the devices of the deployment itself (on the head, once per model file in a process).

The panel's llama.cpp computes every matrix product on a CPU row by row in one way
(scripts/llama_patches/0005-one-row-as-many.patch), so there a token read alone, in a piece of a prompt, or beside
other sequences' tokens has the same keys, values and logits to the bit. Kernels chosen by a step's shape break
that: a GPU's (a matrix-vector kernel for one row, a matrix-matrix one for more), and weights repacked for a CPU
(a kernel per four rows, another for the rest). Then a cached prefix read in other pieces, or a drafted token
verified beside others, may lead a greedy answer elsewhere. So the engine asks the model itself: a short text
read whole, then in pieces, then beside another sequence; the last token's logits compared to the bit.
"""

import ctypes
import os

import numpy as np

# Over 64 tokens, so a whole read is a step of many rows (where a backend may switch to another kernel).
TEXT = (b"The lighthouse keeper climbed the stairs at dusk, lit the lamp, and wrote the weather in his log. Below, "
        b"the fishing boats came home one by one, their lanterns swinging, while gulls settled on the harbour wall "
        b"and the wind turned to the north, bringing rain across the bay before midnight.")


_ON_THE_HEAD: dict[tuple, bool] = {}  # (model file, its size and time, several sequences): found in this process


def any_shape_on_the_head(model_path: str, batcher, tokenize) -> bool:
    """`any_shape` for a model whose layers are all on the head, measured once per model file in this process:
    its library and devices cannot change under it, so a second load would find the same (the suite's in-process
    engines loaded the bundled model over a hundred times, each check a second of CPU)."""
    stat = os.stat(model_path)
    key = (model_path, stat.st_size, stat.st_mtime_ns, len(batcher.sequences) > 1)
    if key not in _ON_THE_HEAD:
        _ON_THE_HEAD[key] = any_shape(batcher, tokenize)
    return _ON_THE_HEAD[key]


def any_shape(batcher, tokenize) -> bool:
    """True when the text's last logits are identical read whole, in pieces of 1, 2 and the rest, and (with two
    sequences or more) beside another sequence's tokens. Leaves every sequence's cache empty."""
    tokens = tokenize(TEXT)
    other = list(reversed(tokens))
    try:  # any failure (a model without logits, a step llama.cpp refuses) counts as "not shown to be the same"
        batcher.forget_all()
        whole = read(batcher, [(0, tokens, 0)])
        batcher.forget_all()
        read(batcher, [(0, tokens[:1], 0)])
        read(batcher, [(0, tokens[1:3], 1)])
        pieces = read(batcher, [(0, tokens[3:], 3)])
        found = np.array_equal(whole, pieces)
        if found and len(batcher.sequences) > 1:
            batcher.forget_all()
            read(batcher, [(0, tokens[:5], 0), (1, other[:9], 0)])
            beside = read(batcher, [(0, tokens[5:], 5), (1, other[9:], 9)])
            found = np.array_equal(whole, beside)
    except (RuntimeError, ValueError):
        found = False
    finally:
        batcher.forget_all()
    return found


def read(batcher, parts: list[tuple[int, list[int], int]]) -> np.ndarray:
    """Decode each (sequence, tokens, first position) in one step; the logits after the first part's last token."""
    api, batch, n, first_last = batcher.api, batcher.batch, 0, None
    for seq_id, tokens, at in parts:
        for i, token in enumerate(tokens):
            batch.token[n], batch.pos[n], batch.n_seq_id[n] = token, at + i, 1
            batch.seq_id[n][0] = seq_id
            batch.logits[n] = i == len(tokens) - 1
            if batch.logits[n] and first_last is None:
                first_last = n
            n += 1
    batch.n_tokens = n
    if api.llama_decode(batcher.ctx, batch) != 0:
        raise RuntimeError("llama_decode failed while the engine compared step shapes")
    row = api.llama_get_logits_ith(batcher.ctx, first_last)
    if not row:
        raise ValueError("no logits")
    return np.ctypeslib.as_array(ctypes.cast(row, ctypes.POINTER(ctypes.c_float)),
                                 shape=(batcher.llm.n_vocab(),)).copy()
