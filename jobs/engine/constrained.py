"""Sampling held to a grammar, as llama.cpp's common/sampling.cpp does it: the sampler chain picks a token from
the whole vocabulary first, and the grammar judges that one token; only when it refuses is the grammar applied
to every candidate and the chain run again over what it allows. Judging one token instead of every one of the
vocabulary's tens of thousands at each step is what keeps a grammar's cost per token near nothing (llama-server's
json_schema answers ran at 0.99x of plain ones, the panel's grammar-first chain at 1.31x: docs/benchmarks.md).

Greedy, the token is the same either way (the likeliest token the grammar allows). The chain and the grammar
hear only the token finally chosen, as llama.cpp's `common_sampler_accept` tells them.
"""

import ctypes

import numpy as np

TOKEN_DATA = np.dtype([("id", "<i4"), ("logit", "<f4"), ("p", "<f4")])  # llama.h's llama_token_data


class Plain:
    """A chain without a grammar: llama.cpp samples and accepts in one call."""

    def __init__(self, chain) -> None:
        self.chain = chain

    def sample(self, api, ctx, row: int) -> int:
        return api.llama_sampler_sample(self.chain.sampler, ctx, row)


class Constrained:
    """A chain and a grammar sampler (owned here, freed with it) over one vocabulary."""

    def __init__(self, api, chain, grammar, n_vocab: int) -> None:
        self.api, self.chain, self.grammar, self.n_vocab = api, chain, grammar, n_vocab
        self.candidates = np.zeros(n_vocab, dtype=TOKEN_DATA)
        self.ids = np.arange(n_vocab, dtype=np.int32)
        self.array = api.llama_token_data_array(
            data=self.candidates.ctypes.data_as(ctypes.POINTER(api.llama_token_data)), size=n_vocab, selected=-1,
            sorted=False)
        self.single = (api.llama_token_data * 1)()
        self.single_array = api.llama_token_data_array(data=self.single, size=1, selected=-1, sorted=False)

    def sample(self, api, ctx, row: int) -> int:
        pointer = api.llama_get_logits_ith(ctx, row)
        logits = np.ctypeslib.as_array(ctypes.cast(pointer, ctypes.POINTER(ctypes.c_float)), shape=(self.n_vocab,))
        token = self._chosen(logits, grammar_first=False)
        if not self._allowed(token):
            token = self._chosen(logits, grammar_first=True)
        api.llama_sampler_accept(self.grammar, token)
        api.llama_sampler_accept(self.chain.sampler, token)
        return token

    def _chosen(self, logits: np.ndarray, grammar_first: bool) -> int:
        self.candidates["id"], self.candidates["logit"], self.candidates["p"] = self.ids, logits, 0.0
        self.array.size, self.array.selected, self.array.sorted = self.n_vocab, -1, False
        if grammar_first:
            self.api.llama_sampler_apply(self.grammar, ctypes.byref(self.array))
        self.api.llama_sampler_apply(self.chain.sampler, ctypes.byref(self.array))
        return int(self.candidates["id"][self.array.selected])

    def _allowed(self, token: int) -> bool:
        self.single[0].id, self.single[0].logit, self.single[0].p = token, 1.0, 0.0
        self.single_array.size, self.single_array.selected, self.single_array.sorted = 1, -1, False
        self.api.llama_sampler_apply(self.grammar, ctypes.byref(self.single_array))
        return self.single[0].logit != float("-inf")

    def __del__(self) -> None:
        if self.grammar:
            self.api.llama_sampler_free(self.grammar)
            self.grammar = None
