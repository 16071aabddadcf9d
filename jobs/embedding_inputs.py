"""What an embedding request may give as its `input`, checked once for /v1/embeddings, Ollama's embed and a batch
file's embedding lines: a text, a list of texts, a token list, or a list of token lists, as OpenAI takes it."""

import json

from jobs.param_error import ParamError
from jobs.params import NOT_TEXT, unicode_text

MAX_INPUTS = 2048  # OpenAI's limit on one request's inputs
WHAT = "input must be a text, a list of texts, a list of token ids, or a list of such lists"


def checked(given, param: str = "input") -> list:
    """The inputs as a list of texts and token lists; ParamError saying what is wrong, naming `param`."""
    if isinstance(given, str):
        given = [given]
    elif isinstance(given, list) and given and all(is_token(t) for t in given):
        given = [given]
    if not isinstance(given, list) or not given:
        raise ParamError(f"{WHAT.replace('input', param, 1)}; it is missing or empty.", param)
    if len(given) > MAX_INPUTS:
        raise ParamError(f"{param} has {len(given)} items; one request takes at most {MAX_INPUTS}.", param)
    for i, item in enumerate(given):
        if isinstance(item, str):
            if not item:
                raise ParamError(f"{param}[{i}] is empty: an empty text has no embedding.", param)
            if not unicode_text(item):
                raise ParamError(f"{param}[{i}] contains {NOT_TEXT}.", param)
        elif not (isinstance(item, list) and item and all(is_token(t) for t in item)):
            raise ParamError(f"{WHAT.replace('input', param, 1)}; {param}[{i}] is {json.dumps(item)[:40]}.", param)
    return given


def is_token(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2 ** 31
