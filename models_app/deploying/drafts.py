"""A deployment's draft model: whether a model may draft for it, and what it costs the head.

The draft runs on the head's CPU beside the engine (jobs/engine/draft_model.py): all its layers and its output
there, with a KV stream per slot as long as the deployment's context. It must share the model's vocabulary
token for token: a draft proposes token ids, and the model checks those ids.
"""

from pathlib import Path

from models_app.gguf.reader import DIGEST, GGUFError, read_header
from models_app.models import GgufModel, ModelStatus
from models_app.planning import planner
from models_app.planning.records import head_machine

TOKENS = "tokenizer.ggml.tokens"
MAX_VOCAB_DIFFERENCE = 128  # as jobs/engine/draft_model.py allows: a model's padding at the end of its tokens


def head_memory(draft: GgufModel, ctx: int, slots: int) -> planner.Memory:
    """What the draft holds on the head for `slots` sequences of `ctx` tokens: planned as the head holding every
    layer of it and its output."""
    shape = planner.shape_of(draft)
    return planner.stage_memory(shape, 0, shape.n_layer + 1, planner.Options(ctx=ctx, slots=slots), is_head=True)


def refusal(model: GgufModel, draft: GgufModel, ctx: int, slots: int, copies: int = 1) -> str | None:
    """Why `draft` cannot draft for `model` served with `slots` sequences of `ctx` tokens (`copies` times on the
    head: an on-call model's replicas), in words; None when it can."""
    if draft.status != ModelStatus.READY:
        return f"The draft model {draft.name} is not ready ({draft.get_status_display().lower()})."
    if draft.pooling:
        return f"{draft.name} is served for embeddings; a draft model must be a model that writes text."
    if not 0 <= model.vocab_size - draft.vocab_size <= MAX_VOCAB_DIFFERENCE:
        return (f"{draft.name}'s vocabulary has {draft.vocab_size:,} tokens and {model.name}'s {model.vocab_size:,}: "
                "a draft model must have the same vocabulary, or the same less a model's padding at its end "
                f"(up to {MAX_VOCAB_DIFFERENCE} tokens): a smaller model of the same family, or one cut from this "
                "model with scripts/cut_draft.py.")
    try:
        ours, theirs = vocabulary(draft, draft.vocab_size), vocabulary(model, draft.vocab_size)
    except GGUFError as exc:
        return f"The panel could not compare the vocabularies: {exc}"
    if ours != theirs:
        return f"{draft.name}'s tokens are not {model.name}'s: a draft model must have the same vocabulary."
    needed, free = copies * head_memory(draft, ctx, slots).total, head_machine().usable_bytes
    if needed > free:
        return (f"{draft.name} needs {needed / planner.MiB:,.0f} MiB on the head for {copies * slots} slot(s) of "
                f"{ctx:,} tokens; the head has {free / planner.MiB:,.0f} MiB free.")
    return None


def vocabulary(model: GgufModel, first: int) -> str | None:
    """A fingerprint of the model's first `first` tokens, read from its GGUF header."""
    key = f"{DIGEST}{first}:{TOKENS}"
    return read_header(Path(model.path), model.name, [key]).values.get(key)
