"""A sequence's cache in llama.cpp's memory (jobs/engine/sequences.py): what a new job keeps of it, and a prefix
taken from another sequence's cache instead of read again.

With a KV stream per sequence, llama.cpp copies a sequence into another by copying the whole stream, on the device
that holds each layer (an RPC server copies within its own memory: nothing crosses the network), at the start of
the next decode step; the copy's cells beyond the prefix are then dropped. Copies queued between two steps run in
the order they were queued, so a sequence filled by one copy may be the source of the next. The numbers are the
source's own, so a copied prefix changes no token where a reused one would not (sequences.Batcher._reusable
decides what may be reused).
"""

COPY_AT_LEAST = 16  # prefix tokens another sequence must hold beyond the job's own before they are copied


def keep(api, memory, seq, count: int) -> int:
    """Forget all but the first `count` tokens of the sequence's cache; how many it keeps. A memory that cannot cut
    a sequence short (a recurrent model's state) clears it instead, and it keeps none."""
    if count < len(seq.cached):
        if not api.llama_memory_seq_rm(memory, seq.seq_id, count, -1):
            api.llama_memory_seq_rm(memory, seq.seq_id, 0, -1)
            count = 0
        del seq.cached[count:]
        seq.ends = [end for end in seq.ends if end <= count]
    return count


def copy(api, memory, source, seq, count: int) -> int:
    """The first `count` tokens of `source`'s cache become `seq`'s whole cache; how many it holds (see `keep`)."""
    api.llama_memory_seq_cp(memory, source.seq_id, seq.seq_id, -1, -1)
    seq.cached, seq.ends = list(source.cached), list(source.ends)
    return keep(api, memory, seq, count)
