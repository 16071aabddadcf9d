"""What structured outputs and tools cost a person, the panel beside llama.cpp's own server on the same split.

The bundled model over 3 simulated laptops (1 Gbit, SSH tunnels, even split, one slot), and llama-server
(`--jinja`, built from the same vendored llama.cpp: scripts/build_llama.py --llama-server) with rpc-servers of
its own on the same laptops and the same plan. One client, greedy, streamed, the same question answered plainly,
held to a nested JSON schema (`response_format` json_schema), and as a named tool's call (`tools` with
`tool_choice` naming it); variants and systems take turns round by round. Per request: time to the first
streamed piece (text or a call's arguments), to the last, and milliseconds per generated token after the first
piece (the tokens as each server's usage counts them; for a call, whose first piece comes once its name is
written, that spreads the tokens before it over the rest, so read its first and last instead).

    .venv/bin/python bench/clients_side_by_side.py [--rounds 4] [--tokens 64]
"""

import argparse
import json
import signal
import statistics
import sys
import time
from collections import defaultdict
from contextlib import ExitStack

import requests
from grammar_cost import PERSON
from harness import table
from llama_anchor import llama_server
from scratch_panel import scratch_panel

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "The weather now in a city.",
                                            "parameters": {"type": "object", "properties": {
                                                "city": {"type": "string", "maxLength": 40},
                                                "unit": {"enum": ["celsius", "fahrenheit"]}},
                                                "required": ["city", "unit"], "additionalProperties": False}}}
VARIANTS = {
    "plain": {"messages": [{"role": "user", "content": "Describe a person who lives in Paris."}]},
    "json_schema": {"messages": [{"role": "user", "content": "Describe a person who lives in Paris, as JSON."}],
                    "response_format": {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}}},
    "tools": {"messages": [{"role": "user", "content": "What is the weather in Paris?"}], "tools": [WEATHER],
              "tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
}
SYSTEMS = ("panel", "llama-server")
SAID: dict[str, str] = {}  # each system's last answer, text or call, shown in the rounds' lines


def streamed(port: int, model: str, body: dict, headers: dict) -> tuple[float, float, int, float]:
    """(ms to the first piece, ms per token after it, tokens, ms to the last piece) of one streamed request.
    llama-server reads each prompt whole, as the panel reads a greedy one (its default would reuse the last
    round's)."""
    sent = {**body, "model": model, "stream": True, "stream_options": {"include_usage": True}, "temperature": 0,
            "max_tokens": ARGS.tokens, **({"cache_prompt": False} if model == "anchor" else {})}
    started, first, last, tokens, said = time.perf_counter(), None, None, 0, []
    with requests.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=sent, headers=headers, stream=True,
                       timeout=600) as answer:
        answer.raise_for_status()
        for line in answer.iter_lines(decode_unicode=True):
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
            delta = chunk["choices"][0].get("delta", {}) if chunk.get("choices") else {}
            if delta.get("content") or delta.get("tool_calls"):
                last = time.perf_counter()
                first = first or last
                said.append(delta.get("content") or "".join(
                    (call.get("function") or {}).get("name") or (call.get("function") or {}).get("arguments") or ""
                    for call in delta["tool_calls"]))
    SAID[model] = "".join(said)
    if first is None or tokens < 2:
        raise SystemExit(f"{model}: an answer of {tokens} tokens cannot be timed ({body})")
    return (first - started) * 1000, (last - first) * 1000 / (tokens - 1), tokens, (last - started) * 1000


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    found = defaultdict(list)
    with scratch_panel() as panel, ExitStack() as stack:
        from clusterpanel.accounts.models import ApiToken, User
        from models_app.library.adding import ensure_bundled

        deployment = panel.deploy(ensure_bundled(), ctx=ARGS.ctx, slots=1, load_within=600)
        ports = {"panel": panel.port, "llama-server": stack.enter_context(llama_server(deployment, 1, ("--jinja",)))}
        models = {"panel": f"deployment-{deployment.pk}", "llama-server": "anchor"}
        headers = {"Authorization": f"Bearer {ApiToken.issue(User.objects.get(username='bench'), 'bench')[1]}"}
        for system in SYSTEMS:  # nothing measured pays for a cold start
            streamed(ports[system], models[system], VARIANTS["plain"], headers)
        for round_no in range(ARGS.rounds):
            for name in VARIANTS:
                order = SYSTEMS if round_no % 2 == 0 else SYSTEMS[::-1]
                for system in order:
                    found[name, system].append(streamed(ports[system], models[system], VARIANTS[name], headers))
                    ttft, per_token, tokens, _ = found[name, system][-1]
                    print(f"  round {round_no} {name:<12} {system:<12} first {ttft:6.0f} ms, "
                          f"{per_token:5.1f} ms/token, {tokens} tokens: {SAID[models[system]][:60]!r}", flush=True)
    report(found)


def report(found: dict) -> None:
    print(f"\nbundled model over 3 simulated laptops (1 Gbit, even split), one client, greedy, streamed, up to "
          f"{ARGS.tokens} tokens, {ARGS.rounds} rounds; medians\n")
    rows = []
    for name in VARIANTS:
        row = [name]
        for system in SYSTEMS:
            ttft, per_token, tokens, whole = (statistics.median(r[i] for r in found[name, system]) for i in range(4))
            row += [f"{per_token:.1f}", f"{ttft:.0f}", f"{whole:.0f}", f"{tokens:.0f}"]
        plain = {s: statistics.median(r[1] for r in found["plain", s]) for s in SYSTEMS}
        mine = {s: statistics.median(r[1] for r in found[name, s]) for s in SYSTEMS}
        row += [f"{mine['panel'] / plain['panel']:.2f}×", f"{mine['llama-server'] / plain['llama-server']:.2f}×",
                f"**{mine['panel'] / mine['llama-server']:.2f}**"]
        rows.append(row)
    print(table(["variant", "panel ms/token", "panel first ms", "panel last ms", "panel tokens",
                 "llama-server ms/token", "llama-server first ms", "llama-server last ms", "llama-server tokens",
                 "panel / its plain", "llama-server / its plain", "panel / llama-server ms/token"], rows))


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--ctx", type=int, default=1024)
    return parser.parse_args()


if __name__ == "__main__":
    ARGS = arguments()
    main()
