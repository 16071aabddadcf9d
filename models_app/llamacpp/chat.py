"""llama.cpp's chat layer, the door to it: JSON schema to grammar, grammar samplers, and (for tools) the model's
own template and its tool-call parser, as llama-server uses them.

They live in llama.cpp's common/, C++ without a C API; scripts/llama_chat/chat.cpp puts a door of JSON strings
on them, built into libclusterpanel-chat.so beside libllama (scripts/build_llama.py). Every call answers in
JSON and an error is ChatError with llama.cpp's own words: a schema or template it cannot take never ends the
process.
"""

import ctypes
import functools
import json

from models_app.llamacpp.libllama import lib_dir

LIBRARY = "libclusterpanel-chat.so"


class ChatError(ValueError):
    pass


@functools.cache
def _lib() -> ctypes.CDLL:
    import llama_cpp  # noqa: F401 (libllama first: the door links to the copy llama-cpp-python loaded, by soname)

    path = lib_dir() / LIBRARY
    if not path.exists():
        raise ChatError(f"{path} is missing: run `make setup` to build llama.cpp's chat layer.")
    lib = ctypes.CDLL(str(path))
    answers = {"cp_schema_grammar": [ctypes.c_char_p], "cp_apply": [ctypes.c_void_p, ctypes.c_char_p],
               "cp_caps": [ctypes.c_void_p],
               "cp_parse": [ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p]}
    for name, argtypes in answers.items():
        function = getattr(lib, name)
        function.argtypes, function.restype = argtypes, ctypes.c_void_p  # a pointer, to free after reading
    lib.cp_free.argtypes, lib.cp_free.restype = [ctypes.c_void_p], None
    lib.cp_templates.argtypes, lib.cp_templates.restype = [ctypes.c_void_p, ctypes.c_char_p], ctypes.c_void_p
    lib.cp_templates_free.argtypes, lib.cp_templates_free.restype = [ctypes.c_void_p], None
    lib.cp_grammar_sampler.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.cp_grammar_sampler.restype = ctypes.c_void_p
    return lib


def _answer(pointer: int | None) -> dict:
    lib = _lib()
    try:
        answer = json.loads(ctypes.string_at(pointer).decode("utf-8", errors="replace"))
    finally:
        lib.cp_free(pointer)
    if "error" in answer:
        raise ChatError(answer["error"])
    return answer


def _json(value) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode()


def schema_grammar(schema: dict) -> str:
    """The GBNF grammar llama-server makes for a JSON schema; ChatError with the converter's reason."""
    return _answer(_lib().cp_schema_grammar(_json(schema)))["grammar"]


def grammar_sampler(model: int, spec: dict) -> int:
    """A llama_sampler pointer constraining a sequence to `spec` ({grammar, kind, lazy, triggers,
    generation_prompt}), to add to a sampler chain (which then owns it); ChatError if llama.cpp cannot parse it."""
    pointer = _lib().cp_grammar_sampler(model, _json(spec))
    if not pointer:
        raise ChatError("llama.cpp could not parse the grammar (its log says where).")
    return pointer


def grammar_parses(grammar: str) -> bool:
    """Whether llama.cpp's grammar parser takes `grammar` (no model needed: the grammar names no tokens)."""
    import llama_cpp

    sampler = llama_cpp.llama_sampler_init_grammar(None, grammar.encode(), b"root")
    if not sampler:
        return False
    llama_cpp.llama_sampler_free(sampler)
    return True


class Templates:
    """A loaded model's chat templates, compiled once; `apply` renders a chat with tools and gives what
    generation needs (prompt, grammar and its triggers, stops, and the syntax `parse` reads answers with)."""

    def __init__(self, model: int, override: str = "") -> None:
        self.pointer = _lib().cp_templates(model, override.encode())
        if not self.pointer:
            raise ChatError("llama.cpp could not compile this model's chat template.")

    def caps(self) -> dict:
        """What the template can show: supports_tools, supports_tool_calls, supports_system_role, ..."""
        return _answer(_lib().cp_caps(self.pointer))

    def apply(self, request: dict) -> dict:
        return _answer(_lib().cp_apply(self.pointer, _json(request)))

    def close(self) -> None:
        if self.pointer:
            _lib().cp_templates_free(self.pointer)
            self.pointer = None


def parse(text: str, syntax: dict, partial: bool = False) -> dict:
    """The assistant message in `text`: content, reasoning_content and tool_calls [{name, arguments, id}]."""
    return _answer(_lib().cp_parse(text.encode(), int(partial), _json(syntax)))
