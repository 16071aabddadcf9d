"""/v1/embeddings' request and answer, in OpenAI's shapes: texts (or token lists) in, one vector each out.

A job of kind `embedding` carries the inputs to the deployment's engine, queued,
admitted and routed as a chat is (jobs/api/openai_submit.py); the engine writes
the vectors with the job's end (jobs/engine/embedding.py), and the answer reads
them from there.
"""

import json

from jobs import embedding_inputs
from jobs.api.inputs import InputError
from jobs.api.openai_api import Request
from jobs.engine.embedding import decoded
from jobs.models import Job, JobKind
from jobs.param_error import ParamError

ENCODINGS = ("float", "base64")


def parse(body: dict, kind: str = JobKind.EMBEDDING) -> Request:
    """A Request of kind embedding from an OpenAI body, or InputError naming the field."""
    given = body.get("input")
    encoding = body.get("encoding_format") or "float"
    if encoding not in ENCODINGS:
        raise InputError(f"encoding_format must be float or base64, not {json.dumps(encoding)}.", "encoding_format")
    dimensions = body.get("dimensions")
    if dimensions is not None and (isinstance(dimensions, bool) or not isinstance(dimensions, int)
                                   or dimensions < 1):
        raise InputError("dimensions must be a whole number of at least 1.", "dimensions")
    try:
        checked = embedding_inputs.checked(given)
    except ParamError as exc:
        raise InputError(str(exc), exc.param) from None
    return Request(kind=JobKind.EMBEDDING, model=body.get("model"), inputs=checked,
                   embedding={"encoding_format": encoding, "dimensions": dimensions})


def fits(wanted: Request, model) -> None:
    """Checked against the model it was routed to, before anything is queued: token ids within its vocabulary, and
    `dimensions` its width or none (a model not trained to be cut, as text-embedding-3's were, loses its meaning
    when cut)."""
    for i, given in enumerate(wanted.inputs):
        outside = next((t for t in given if t >= model.vocab_size), None) if isinstance(given, list) else None
        if outside is not None:
            raise InputError(f"input[{i}] holds token {outside}, which the vocabulary of {model.name} (tokens 0 to "
                             f"{model.vocab_size - 1}) does not have.", "input")
    dimensions, n_embd = wanted.embedding.get("dimensions"), model.n_embd
    if dimensions is not None and dimensions != n_embd:
        raise InputError(f"dimensions must be {n_embd} for this model, or left out: its vectors have {n_embd} "
                         "numbers and it was not trained for shorter ones.", "dimensions")


def answer(job_id: int, wanted: Request, model: str) -> dict:
    """The finished job's vectors in OpenAI's list (database: the vectors are not carried by events)."""
    job = Job.objects.only("embeddings", "prompt_tokens").get(pk=job_id)
    as_text = wanted.embedding.get("encoding_format") == "base64"
    data = [{"object": "embedding", "index": i, "embedding": vector if as_text else decoded(vector)}
            for i, vector in enumerate(job.embeddings or [])]
    tokens = job.prompt_tokens or 0
    return {"object": "list", "data": data, "model": model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}
