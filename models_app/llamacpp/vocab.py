"""A model's tokenizer and chat template in the web process, to count a request's tokens without its engine:
llama.cpp loads the GGUF's vocabulary alone (`vocab_only`: its metadata, not its weights, a few MB), once per
model and process, and its chat layer renders the messages and tools as the engine renders them before they are
tokenized."""

import threading

from models_app.llamacpp import chat, libllama

_loaded: dict[str, tuple[int, int, "chat.Templates"]] = {}  # path → (model, vocab, templates); kept, as models are few
_lock = threading.Lock()


class VocabError(RuntimeError):
    pass


def _vocab(path: str) -> tuple[int, int, "chat.Templates"]:
    import llama_cpp

    with _lock:
        if path not in _loaded:
            libllama.load_backends()
            params = llama_cpp.llama_model_default_params()
            params.vocab_only = True
            model = llama_cpp.llama_model_load_from_file(path.encode(), params)
            if not model:
                raise VocabError(f"llama.cpp could not read the vocabulary of {path}.")
            _loaded[path] = (model, llama_cpp.llama_model_get_vocab(model), chat.Templates(model))
        return _loaded[path]


def tokens(path: str, text: str) -> int:
    """How many tokens llama.cpp makes of `text` (special tokens, such as a template's markers, as one each)."""
    import llama_cpp

    _, vocab, _ = _vocab(path)
    data = text.encode()
    found = llama_cpp.llama_tokenize(vocab, data, len(data), None, 0, True, True)
    return -found if found < 0 else found  # with no room given, llama.cpp answers minus the count


def native_tools(path: str) -> bool:
    """Whether the model's template shows tools itself."""
    return bool(_vocab(path)[2].caps().get("supports_tool_calls"))


def prompt_tokens(path: str, request: dict) -> int:
    """The tokens of the prompt a chat request makes (messages, and tools where the template shows them): the
    model's template rendered by llama.cpp's chat layer, with the turn that the answer begins."""
    _, _, templates = _vocab(path)
    shown = {key: request[key] for key in ("messages", "tools", "tool_choice", "parallel_tool_calls", "json_schema")
             if request.get(key) is not None}
    return tokens(path, templates.apply(shown)["prompt"])
