"""How often do llama.cpp's batched kernels change a greedy answer? Per model, the same chat prompts each run
alone on the engine and then all of them through a batch of `slots` sequences kept full (a new one joins
whenever one ends), greedy (temperature 0, repeat_penalty 1). Counts, not times, so the machine's load does
not matter.

For each model: how many batched answers are identical token for token to the lone run; for the others, the
first token where they part (median and range); the same count for a second batched pass (the same jobs in
the same order, but each on another sequence than in the first pass: the sequences were freed in another
order); and how many lone answers equal
single-process llama-cpp-python's `create_completion`, piece for piece (the engine's promise, which Verify
checks).

By default the engine runs on the head alone (no rpc-servers): the laptops' rpc-servers run the same ggml
CPU kernels on the same batch shapes, so the arithmetic is the same there. `--lan N` runs the engine over N
simulated laptops instead (1 Gbit links, every layer on the laptops, split evenly, servers reached directly);
llama-cpp-python's reference still runs on the head alone, in a process of its own. A model without a chat
template is given plain-text prompts (completions) instead.

    .venv/bin/python bench/batched_greedy.py [--models bundled qwen2] [--prompts 50] [--slots 8]
                                             [--max-tokens 64] [--ctx 1024] [--lan 3]
"""

import argparse
import contextlib
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clusterpanel.settings")

MODELS = {"bundled": "SmolLM2 135M Q4_1 (bundled)", "qwen2": "qwen2 test model, 12 layers f16"}
ASKS = [
    "List the planets of the solar system in order, one per line.", "Write a haiku about laptops.",
    "What is 17 times 23?", "Explain what a GPU is in two sentences.", "Name three rivers in Europe.",
    "Say hello in French.", "Why is the sky blue?", "Give me a recipe for pancakes.",
    "What is the capital of Australia?", "Describe a cat to someone who has never seen one.",
    "Write a short poem about the sea.", "How do I boil an egg?", "What does a compiler do?",
    "Tell me a joke about programmers.", "Summarise the story of Cinderella in three sentences.",
    "What are the primary colours?", "How many legs does a spider have?", "Translate 'good morning' into Spanish.",
    "Give three tips for a job interview.", "What is photosynthesis?", "Write a limerick about a dog.",
    "Why do we have seasons?", "Explain recursion to a child.", "What is the boiling point of water in Fahrenheit?",
    "Name five fruits that are red.", "How does a bicycle stay upright?", "What is a prime number?",
    "Write a thank-you note to a teacher.", "What is the difference between weather and climate?",
    "Suggest a name for a bakery.", "How far is the Moon from the Earth?", "What is an API?",
    "Describe the taste of lemon.", "Give me a packing list for a weekend of camping.",
    "Who wrote Romeo and Juliet?", "What is the largest ocean?", "Explain what a database index is.",
    "Write a two-line story about a robot.", "How do bees make honey?", "What should I eat before a run?",
    "Name the days of the week in German.", "What is gravity?", "How do I make a cup of tea?",
    "Why do leaves change colour in autumn?", "What is the square root of 144?",
    "Give me a motivational quote.", "What is a black hole?", "Explain how a rainbow forms.",
    "Write a short product description for a water bottle.", "What are three uses of a paperclip?",
]
GREEDY = {"temperature": 0.0, "top_p": 1.0, "top_k": 40, "repeat_penalty": 1.0, "stop": []}


def model_path(name: str, scratch: Path) -> Path:
    from models_app.library.bundled import bundled_model_path

    if name == "bundled":
        return bundled_model_path()
    from tests.models_app.gguf_files import write_loadable_model

    return write_loadable_model(scratch / "q12.gguf", layers=12)


class Recorder:
    """The token ids each job samples, by job key: the batcher turns every sampled token (end of generation
    aside) into its piece with `_piece`, inside `_sample`, which knows the sequence; both are wrapped on this
    one instance."""

    def __init__(self, batcher) -> None:
        self.tokens: dict[int, list[int]] = {}
        self.key = None
        sample, piece = batcher._sample, batcher._piece

        def sampling(seq, row):
            self.key = seq.work.key
            return sample(seq, row)

        def to_piece(token):
            self.tokens.setdefault(self.key, []).append(token)
            return piece(token)

        batcher._sample, batcher._piece = sampling, to_piece


def prompts(engine, count: int) -> tuple[list[tuple[list[int], list[str]]], str]:
    """`count` different prompts as tokens with their stops: chat prompts in the model's own template, or plain
    text if it has none. And which kind they are."""
    asks = ASKS[:count]
    if engine.llm.metadata.get("tokenizer.chat_template"):
        return [engine.chat_prompt([{"role": "user", "content": ask}]) for ask in asks], "chat"
    return [(engine.llm.tokenize(f"Question: {ask}\nAnswer:".encode()), []) for ask in asks], "completion"


def alone(engine, recorder, asked, params) -> tuple[list[list[int]], list[list[str]]]:
    """Each prompt run by itself (Engine.run, job key 0): its tokens and its streamed pieces."""
    tokens, pieces = [], []
    for prompt, stops in asked:
        recorder.tokens[0] = []
        outcome = engine.run(prompt, params, lambda text: None, lambda: False, stops)
        tokens.append(recorder.tokens.pop(0))
        pieces.append(outcome.pieces)
    return tokens, pieces


def batched(engine, recorder, asked, params) -> list[list[int]]:
    """All prompts through the batcher, every sequence kept busy: a new job joins as soon as one ends."""
    batcher, waiting, done = engine.batcher, list(range(len(asked))), 0
    recorder.tokens = {}
    while done < len(asked):
        while batcher.free and waiting:
            key = waiting.pop(0)
            prompt, stops = asked[key]
            batcher.add(engine.work(key + 1, prompt, params, lambda text: None, stops))
        done += len(batcher.step())
    return [recorder.tokens.get(key + 1, []) for key in range(len(asked))]


def reference(path: Path, asked, params, ctx: int) -> tuple[list[list[int]], list[list[str]]]:
    """Single-process llama-cpp-python's tokens and streamed pieces for each prompt (Verify compares pieces).
    In a fresh process: this one may have rpc-servers registered, which a plain Llama must not see."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(reference_here, (path, asked, params, ctx))


def reference_here(path: Path, asked, params, ctx: int) -> tuple[list[list[int]], list[list[str]]]:
    import llama_cpp

    from models_app.llamacpp import cpucheck

    with cpucheck.loading():  # as the panel loads it: the backends that fit this CPU, only kernels that run here
        llm = llama_cpp.Llama(model_path=str(path), n_ctx=ctx, verbose=False)
    sampled, sample = [], llm.sample

    def recording(*args, **kwargs):  # create_completion samples through generate, which calls self.sample
        token = sample(*args, **kwargs)
        sampled.append(token)
        return token

    llm.sample = recording
    tokens, pieces = [], []
    for prompt, stops in asked:
        sampled.clear()
        stream = llm.create_completion(prompt, stream=True, max_tokens=params["max_tokens"],
                                       temperature=0.0, top_p=1.0, top_k=40, repeat_penalty=1.0, stop=stops or None)
        pieces.append([chunk["choices"][0]["text"] for chunk in stream if chunk["choices"][0]["text"]])
        tokens.append([token for token in sampled if not llama_cpp.llama_vocab_is_eog(llm._model.vocab, token)])
        llm.reset()
    del llm
    return tokens, pieces


def first_difference(mine: list[str], theirs: list[str]) -> str:
    """Where two lists of pieces part, and the pieces there, for the log."""
    at = next((i for i, (a, b) in enumerate(zip(mine, theirs, strict=False)) if a != b), min(len(mine), len(theirs)))
    return f"piece {at}: engine {mine[at:at + 3]!r}, llama-cpp-python {theirs[at:at + 3]!r}"


def parting(a: list[int], b: list[int]) -> int:
    """The first position where two token lists differ (the shorter one's length if one is the other's start)."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


def measure(name: str, path: Path, args, endpoints: list[str]) -> dict:
    from jobs.engine.loaded_model import Engine
    from models_app.gguf.meta import read_metadata
    from models_app.planning.planner import proportional_counts

    params = {**GREEDY, "max_tokens": args.max_tokens}
    n_layer = read_metadata(path).n_layer
    split = proportional_counts(n_layer + 1, [1.0] * len(endpoints)) if endpoints else []
    engine = Engine(str(path), endpoints, n_layer + 1 if endpoints else 0, split, args.ctx, [], slots=args.slots)
    engine.load(lambda progress: None)
    recorder = Recorder(engine.batcher)
    asked, kind = prompts(engine, args.prompts)
    started = time.monotonic()
    lone, lone_pieces = alone(engine, recorder, asked, params)
    first = batched(engine, recorder, asked, params)
    second = batched(engine, recorder, asked, params)
    del engine
    ref_tokens, ref = reference(path, asked, params, args.ctx)
    for i, (mine, theirs) in enumerate(zip(lone_pieces, ref, strict=True)):
        if mine != theirs:
            same = "equal" if lone[i] == ref_tokens[i] else f"part at {parting(lone[i], ref_tokens[i])}"
            print(f"{name} prompt {i}: tokens {same}, "
                  f"{first_difference(mine, theirs)}", file=sys.stderr)
    parts = [parting(a, b) for a, b in zip(lone, first, strict=True) if a != b]
    return {"model": MODELS[name], "kind": kind, "n": len(asked),
            "prompt_tokens": statistics.median(len(p) for p, _ in asked),
            "lone_tokens": sum(len(t) for t in lone),
            "same": sum(a == b for a, b in zip(lone, first, strict=True)),
            "parts": parts,
            "again": sum(a == b for a, b in zip(lone, second, strict=True)),
            "passes_agree": sum(a == b for a, b in zip(first, second, strict=True)),
            "reference": sum(a == b for a, b in zip(lone_pieces, ref, strict=True)),
            "reference_tokens": sum(a == b for a, b in zip(lone, ref_tokens, strict=True)),
            "seconds": time.monotonic() - started}


@contextlib.contextmanager
def laptops(count: int):
    """Endpoints of `count` simulated laptops' rpc-servers (none: the head alone)."""
    if not count:
        yield []
        return
    from lan import bench_lan, with_runtime

    from nodes.servers import rpcserver

    install_dir, port = "~/.clusterpanel", 50213
    with bench_lan(count, rate="1gbit", name="bgreedy", subnet="10.245.0.0/24") as lan:
        nodes = with_runtime(lan, install_dir)
        try:
            for node in nodes:
                rpcserver.start(node, install_dir, port, bind=node.host)
            yield [f"{node.host}:{port}" for node in nodes]
        finally:
            for node in nodes:
                rpcserver.stop(node, install_dir, port)


def where_it_ran(args) -> str:
    if not args.lan:
        return "the head alone (CPU, no rpc-servers)"
    return f"over {args.lan} simulated laptops (1 Gbit links, every layer on the laptops, even split)"


def table(rows: list[dict], args) -> str:
    lines = [f"{args.prompts} prompts each, greedy, max_tokens {args.max_tokens}, ctx {args.ctx} per sequence; "
             f"alone = Engine.run at slots={args.slots}; batched = all through {args.slots} sequences kept busy; "
             f"{where_it_ran(args)}\n",
             "| model | prompts | batched = alone, token for token | where the others part: median (range) "
             "| second batched pass = alone | alone = llama-cpp-python create_completion: tokens "
             "| and streamed pieces |",
             "|---|---|---:|---|---:|---:|---:|"]
    for row in rows:
        n, parts = row["n"], row["parts"]
        where = f"token {statistics.median(parts):g} ({min(parts)}–{max(parts)})" if parts else "—"
        lines.append(f"| {row['model']} | {row['kind']}, median {row['prompt_tokens']:g} tokens, "
                     f"{row['lone_tokens']} generated alone | {row['same']} of {n} | {where} "
                     f"| {row['again']} of {n} | {row['reference_tokens']} of {n} | {row['reference']} of {n} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    parser.add_argument("--prompts", type=int, default=50, choices=range(1, len(ASKS) + 1), metavar="N")
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--ctx", type=int, default=1024)
    parser.add_argument("--lan", type=int, default=0, metavar="LAPTOPS", help="0: the head alone")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="batched-greedy-") as scratch, laptops(args.lan) as endpoints:
        for name in args.models:
            rows.append(measure(name, model_path(name, Path(scratch)), args, endpoints))
            row = rows[-1]
            print(f"{row['model']}: {row['same']} of {row['n']} equal, parting at {sorted(row['parts'])}, "
                  f"the two batched passes agree on {row['passes_agree']}, {row['seconds']:.0f} s", file=sys.stderr)
    print(table(rows, args))


if __name__ == "__main__":
    main()
