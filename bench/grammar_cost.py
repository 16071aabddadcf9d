"""What holding an answer to a JSON schema costs the engine: the bundled model on the head (no laptops: only
the sampler's share is measured), greedy, one sequence, the same prompt answered plainly, under json_object and
under a nested json_schema, in alternating rounds. Per variant: milliseconds per generated token after the first,
and time to first token (the prompt read, plus making the grammar sampler).

    .venv/bin/python bench/grammar_cost.py [--rounds 5] [--tokens 96]
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.harness import alternate, ratio_table, scratch_django  # noqa: E402

PERSON = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 30}, "age": {"type": "integer", "minimum": 0, "maximum": 130},
    "address": {"type": "object", "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
                "required": ["city", "country"], "additionalProperties": False},
    "hobbies": {"type": "array", "items": {"type": "string"}, "maxItems": 5}},
    "required": ["name", "age", "address", "hobbies"], "additionalProperties": False}
QUESTION = "Describe a person who lives in Paris, with their hobbies, as JSON."


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=96)
    args = parser.parse_args()
    with scratch_django(migrate=False):
        from jobs import structured
        from jobs.engine.loaded_model import Engine
        from models_app.library.bundled import bundled_model_path

        engine = Engine(str(bundled_model_path()), [], 0, [], 1024, [], slots=1)
        engine.load(lambda progress: None)
        prompt, stops = engine.chat_prompt([{"role": "user", "content": QUESTION}])
        formats = {"plain": None, "json_object": structured.response_format({"type": "json_object"}),
                   "json_schema": structured.response_format(
                       {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}})}
        per_token, first = {}, {}

        def variant(name: str):
            def run() -> float:
                params = {"temperature": 0.0, "top_p": 1.0, "top_k": 40, "repeat_penalty": 1.0, "stop": [],
                          "max_tokens": args.tokens, **({"response_format": formats[name]} if formats[name] else {})}
                stamps = []
                started = time.perf_counter()
                outcome = engine.run(prompt, params, lambda text: stamps.append(time.perf_counter()),
                                     lambda: False, stops)
                first.setdefault(name, []).append(stamps[0] - started)
                tokens = outcome.completion_tokens
                return (stamps[-1] - stamps[0]) / max(1, tokens - 1) * 1000
            return run

        per_token = alternate(args.rounds, {name: variant(name) for name in formats})
        print(f"\nbundled model on the head, greedy, up to {args.tokens} tokens, {args.rounds} rounds\n")
        print("ms per generated token (after the first)\n")
        print(ratio_table(per_token, "plain", unit="ms", digits=2))
        print("\ntime to first token\n")
        print(ratio_table({name: [s * 1000 for s in found] for name, found in first.items()}, "plain", unit="ms",
                          digits=1))


if __name__ == "__main__":
    main()
