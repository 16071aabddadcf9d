"""One deployment's model, loaded once in this process with its rpc-servers, and the jobs it runs.

It lives in the child process of a Celery worker dedicated to the deployment
(jobs/engine/workers.py starts one per ready deployment): llama.cpp aborts the whole
process when an rpc-server vanishes, and a child of that worker loses nothing
but itself. Jobs arrive through jobs/tasks.py, which claims them first.
"""

import ctypes
import logging
from collections.abc import Callable
from dataclasses import dataclass

from jobs import structured
from jobs.engine import generic_tools, pieces, shapes
from jobs.engine.embedding import Embedder
from jobs.engine.sequences import Batcher, Outcome, Work
from models_app.llamacpp import cpucheck, libllama
from models_app.llamacpp.oneshot import LAYER_PLACED, sequences

log = logging.getLogger(__name__)
GGML_LOG_INFO, GGML_LOG_WARN, GGML_LOG_ERROR, GGML_LOG_CONT = 2, 3, 4, 5  # ggml.h's enum ggml_log_level


def kept(messages: list[dict], dropped: int) -> list[dict]:
    """A conversation with its `dropped` oldest turns left out; a system prompt always stays."""
    system = messages[:1] if messages and messages[0]["role"] == "system" else []
    return system + messages[len(system) + dropped:]


class EngineError(RuntimeError):
    pass


class ContextExceeded(EngineError):
    pass


class LogCapture:
    """llama.cpp's log lines in this process, kept (for placement) and passed on to the worker log.
    One per process, never freed: llama.cpp still logs while the interpreter shuts down."""

    _instance: "LogCapture | None" = None

    @classmethod
    def start(cls) -> "LogCapture":
        if cls._instance is None:
            cls._instance = cls()
        cls._instance.lines, cls._instance.keeping = [], True
        return cls._instance

    def __init__(self) -> None:
        import llama_cpp

        self.lines: list[str] = []
        self.keeping = True
        self.last_level = GGML_LOG_INFO
        self._callback = llama_cpp.llama_log_callback(self._on_line)  # kept: C holds only a pointer
        llama_cpp.llama_log_set(self._callback, ctypes.c_void_p(0))

    def _on_line(self, level: int, text: bytes, user_data) -> None:
        line = text.decode(errors="replace")
        if self.keeping:
            self.lines.append(line)
        if level == GGML_LOG_CONT:  # the rest of the line before: logged as that one was
            level = self.last_level
        self.last_level = level
        if level == GGML_LOG_ERROR:
            log.error("llama.cpp: %s", line.rstrip())
        elif level in (GGML_LOG_INFO, GGML_LOG_WARN):
            log.warning("llama.cpp: %s", line.rstrip())

    def text(self) -> str:
        return "".join(self.lines)


@dataclass(frozen=True)
class Rendered:
    """A chat rendered by llama.cpp's chat layer (`Engine.tool_prompt`)."""
    tokens: list[int]
    stops: list[str]
    grammar: dict | None  # chat.grammar_sampler's spec
    special: frozenset[int]  # tokens shown as text (the model's call markers)
    syntax: dict | None  # chat.parse's ({"generic": True}: generic_tools.parse's); None: a plain answer


class Engine:
    def __init__(self, model_path: str, endpoints: list[str], n_gpu_layers: int, tensor_split: list[int],
                 ctx: int, expected_devices: list[str], slots: int = 1) -> None:
        self.model_path, self.endpoints, self.ctx, self.slots = model_path, endpoints, ctx, slots
        self.n_gpu_layers, self.tensor_split, self.expected = n_gpu_layers, tensor_split, expected_devices
        self.llm, self.batcher, self._templates = None, None, None
        self._formatters = {}
        self.draft_problem, self._draft_refused = "", None  # why the draft model was left out (use_draft)

    def load(self, progress: Callable[[float], None]) -> None:
        """Register the servers, load, and check every layer sits where the plan put it (EngineError if not)."""
        capture = LogCapture.start()
        if self.endpoints:
            libllama.register_rpc_servers(self.endpoints)
        from llama_cpp import Llama

        try:
            # Each sequence its own KV stream: `slots` people each up to the context, as the planner counts them.
            with cpucheck.loading(progress), sequences(self.slots):
                self.llm = Llama(model_path=self.model_path, n_ctx=self.ctx * self.slots, verbose=True,
                                 n_gpu_layers=self.n_gpu_layers if self.endpoints else 0,
                                 tensor_split=[float(x) for x in self.tensor_split] or None)
        except (ValueError, RuntimeError) as exc:
            raise EngineError(f"llama.cpp could not load the model: {exc}") from None
        capture.keeping = False  # what follows (timings after each job) is only passed on to the log
        placed = {int(layer): device for layer, device in LAYER_PLACED.findall(capture.text())}
        found = [placed.get(i) for i in range(len(self.expected))]
        if self.endpoints and found != self.expected:
            raise EngineError(f"llama.cpp placed the layers as {found}, not as planned {self.expected}.")
        self.batcher = Batcher(self.llm, self.slots)
        tokenize = lambda text: self.llm.tokenize(text, add_bos=False)  # noqa: E731
        self.batcher.any_shape = (shapes.any_shape(self.batcher, tokenize) if self.endpoints
                                  else shapes.any_shape_on_the_head(self.model_path, self.batcher, tokenize))

    def use_draft(self, path: str | None) -> None:
        """Draft with the model at `path` on the head from the next step on (None: n-grams, when drafting is on).
        A draft that cannot draft for this model is left out, and `draft_problem` says why."""
        current = self.batcher.draft_model
        if path == (current.path if current else None) or (path and path == self._draft_refused):
            return
        from jobs.engine.draft_model import DraftError, ModelDraft

        if current is not None:
            self.batcher.draft_model = None
            current.close()
        self.draft_problem, self._draft_refused = "", None
        if path:
            try:
                self.batcher.draft_model = ModelDraft(path, self.ctx, self.slots, self.llm)
            except Exception as exc:  # noqa: BLE001 - whatever a file does, the engine goes on without it
                why = str(exc) if isinstance(exc, DraftError) else f"it could not be loaded: {exc!r}"
                self.draft_problem, self._draft_refused = why, path
                log.warning("deployment's draft model %s left out: %s", path, why)

    def formatter(self, answer: bool = True):
        """The model's own chat template, compiled once (a Jinja compile per job would delay every answer); with
        the prompt for the answer at its end, or without it (jobs/engine/pieces.py)."""
        from llama_cpp import llama_chat_format

        if answer not in self._formatters:
            template = self.llm.metadata.get("tokenizer.chat_template")
            if not template:
                raise EngineError("This model has no chat template; use a completion instead.")
            vocab = self.llm._model

            def piece(token_id: int) -> str:
                return vocab.token_get_text(token_id) if token_id >= 0 else ""

            self._formatters[answer] = llama_chat_format.Jinja2ChatFormatter(
                template=template, eos_token=piece(self.llm.token_eos()), bos_token=piece(self.llm.token_bos()),
                add_generation_prompt=answer, stop_token_ids=[self.llm.token_eos()])
        return self._formatters[answer]

    def chat_prompt(self, messages: list[dict]) -> tuple[list[int], list[str]]:
        """The tokens llama-cpp-python's chat handler would build from the model's own template, and its stops."""
        formatted = self.formatter()(messages=messages)
        tokens = self.llm.tokenize(formatted.prompt.encode(), add_bos=not formatted.added_special, special=True)
        stops = formatted.stop if isinstance(formatted.stop, list) else [formatted.stop] if formatted.stop else []
        return tokens, stops

    def turn_cuts(self, messages: list[dict], tokens: list[int]) -> tuple[int, ...]:
        """Where `chat_prompt(messages)` is read in pieces: after the template's preamble and where each earlier
        answer begins."""
        formatted = self.formatter()(messages=messages)
        bos = not formatted.added_special
        return pieces.turn_cuts(lambda some, answer: self.formatter(answer)(messages=some).prompt,
                                lambda text, first: self.llm.tokenize(text.encode(), add_bos=bos and first,
                                                                      special=True),
                                messages, formatted.prompt, tokens)

    def fitting_chat_prompt(self, messages: list[dict], room: int) -> tuple[list[int], list[str], int]:
        """`chat_prompt` of a conversation, its oldest turns left out until `room` tokens are left for the
        answer; and how many messages were left out. The system prompt and the newest message always stay, and
        turns go a question and its answer together, so roles still alternate."""
        turns = len(messages) - (1 if messages and messages[0]["role"] == "system" else 0)
        dropped = 0
        while True:
            tokens, stops = self.chat_prompt(kept(messages, dropped))
            if len(tokens) + room <= self.ctx or turns - dropped <= 1:
                return tokens, stops, dropped
            dropped += 2 if turns - dropped > 2 else 1

    def templates(self):
        """llama.cpp's own rendering of the model's template (models_app/llamacpp/chat.py), compiled once: the one
        that takes tools and says how the model writes a call."""
        from models_app.llamacpp import chat

        if self._templates is None:
            self._templates = chat.Templates(self.llm._model.model)
        return self._templates

    def tool_prompt(self, messages: list[dict], params: dict) -> Rendered:
        """A chat with tools, or with tool calls and results in its history, rendered as llama-server renders it:
        the prompt, its stops, the grammar that holds a call to its function's schema (lazy, from the model's
        call marker on, unless a call is required) and the syntax its answer is parsed with."""
        request = generic_tools.chat_request(messages, params, self.templates().caps().get("supports_tool_calls"))
        if request.get("generic"):
            return self.generic_tool_prompt(request)
        out = self.templates().apply(request)
        bos = self.llm._model.token_get_text(self.llm.token_bos()) if self.llm.token_bos() >= 0 else ""
        tokens = self.llm.tokenize(out["prompt"].encode(), add_bos=not (bos and out["prompt"].startswith(bos)),
                                   special=True)
        grammar = {"grammar": out["grammar"], "kind": "tool_calls", "lazy": out["grammar_lazy"],
                   "triggers": out["grammar_triggers"], "generation_prompt": out["generation_prompt"]}
        special = set()
        for text in out["preserved_tokens"]:
            found = self.llm.tokenize(text.encode(), add_bos=False, special=True)
            if len(found) == 1:  # a marker the model writes as one special token: shown, so the parser sees it
                special.add(found[0])
        syntax = {"format": out["format"], "parser": out["parser"], "generation_prompt": out["generation_prompt"]}
        return Rendered(tokens, list(out["additional_stops"]), grammar if out["grammar"] else None,
                        frozenset(special), syntax)

    def generic_tool_prompt(self, request: dict) -> Rendered:
        """For a template that shows no tools: jobs/engine/generic_tools.py. With no tools offered, a plain answer
        (syntax None) after a history shown in words."""
        tokens, stops = self.chat_prompt(request["messages"])
        functions, choice, parallel = request["functions"], request["tool_choice"], request["parallel_tool_calls"]
        if not functions or choice == "none":
            return Rendered(tokens, stops, None, frozenset(), None)
        grammar = structured.grammar(generic_tools.schema(functions, choice, parallel, request["answer"]))
        return Rendered(tokens, stops, {"grammar": grammar, "kind": "user"}, frozenset(),
                        {"generic": True, "held": request["answer"] is not None})

    def work(self, key: int, prompt: list[int], params: dict, on_text: Callable[[str], None],
             stops: list[str] = (), reuse: bool = False, rendered: Rendered | None = None,
             cuts: tuple[int, ...] = ()) -> Work:
        """A job for the batcher; ContextExceeded if its prompt leaves no room in a sequence's context."""
        limit = self.ctx - len(prompt)
        if limit <= 0:
            raise ContextExceeded(f"Context length exceeded: the prompt has {len(prompt)} tokens and the "
                                  f"deployment's context is {self.ctx}; shorten it or deploy with a longer context.")
        return Work(key, prompt, params, [*params.get("stop", []), *stops], on_text,
                    min(params["max_tokens"], limit), reuse, rendered and rendered.grammar,
                    rendered.special if rendered else frozenset(), cuts=cuts)

    def embedding_tokens(self, inputs: list) -> list[list[int]]:
        """Each input's tokens (a text's, read as a completion's prompt is; a token list checked against the
        vocabulary); ContextExceeded for one longer than a sequence's context."""
        n_vocab, found = self.llm.n_vocab(), []
        for number, given in enumerate(inputs):
            if isinstance(given, str):
                tokens = self.llm.tokenize(given.encode(), add_bos=True, special=False)
            else:
                tokens = list(given)
                outside = next((t for t in tokens if not 0 <= t < n_vocab), None)
                if outside is not None:
                    raise EngineError(f"input[{number}] holds token {outside}, which this model's vocabulary "
                                      f"(tokens 0 to {n_vocab - 1}) does not have.")
            if len(tokens) > self.ctx:
                raise ContextExceeded(f"Context length exceeded: input[{number}] is too long: the prompt has "
                                      f"{len(tokens)} tokens and the deployment's context is {self.ctx}; shorten it "
                                      "or split it.")
            found.append(tokens)
        return found

    def embed(self, inputs: list[list[int]]) -> list:
        """Each token list's vector (jobs/engine/embedding.py), read between two decode steps."""
        return Embedder(self.batcher).vectors(inputs)

    def run(self, prompt: list[int], params: dict, on_token: Callable[[str], None],
            cancelled: Callable[[], bool], extra_stops: list[str] = (), rendered: Rendered | None = None) -> Outcome:
        """One job alone, to its end: for benchmarks and one-off uses (the engine worker batches:
        jobs/engine/child.py)."""
        outcome = self.batcher.add(self.work(0, prompt, params, on_token, extra_stops, rendered=rendered))
        (seq,) = self.batcher.busy
        while seq.work is not None:
            self.batcher.step()
            if seq.work is not None and cancelled():
                self.batcher.cancel(seq)
        return outcome
