"""Log probabilities of the tokens an answer is made of, and of the likeliest others at each place, as OpenAI's
`logprobs` gives them: read from the model's logits for the sequence's row, after the sampler's temperature
(greedy: as they are), before any penalty or grammar narrowed the choice."""

import ctypes

import numpy as np


def entry(api, ctx, row: int, n_vocab: int, token: int, temperature: float, top: int,
          piece: "callable") -> dict:
    """{"token", "logprob", "bytes", "top_logprobs": [...]} for `token` sampled from `row`'s logits; `piece(id)`
    gives a token's bytes."""
    pointer = api.llama_get_logits_ith(ctx, row)
    logits = np.ctypeslib.as_array(ctypes.cast(pointer, ctypes.POINTER(ctypes.c_float)), shape=(n_vocab,))
    scaled = logits.astype(np.float64) / (temperature if temperature > 0 else 1.0)
    peak = scaled.max()
    logprob = scaled - (peak + np.log(np.exp(scaled - peak).sum()))
    found = described(int(token), float(logprob[token]), piece)
    if top:
        best = np.argpartition(-logprob, top)[:top]
        best = best[np.argsort(-logprob[best], kind="stable")]
        found["top_logprobs"] = [described(int(i), float(logprob[i]), piece) for i in best]
    else:
        found["top_logprobs"] = []
    return found


def described(token: int, logprob: float, piece) -> dict:
    data = piece(token)
    return {"token": data.decode("utf-8", errors="replace"), "logprob": round(logprob, 6), "bytes": list(data)}
