"""A long conversation's time to first token, turn by turn, with and without its cache: the panel against
llama.cpp's own server on the same split.

A whole panel on a scratch data folder with three simulated laptops (1 Gbit links, SSH tunnels), the bundled
model deployed over them (even split, one slot, `--ctx` tokens) and llama-server with rpc-servers of its own on
the same laptops and the same plan (bench/llama_anchor.py, -np 1). Each system holds its own `--turns`-turn
conversation, greedy, streamed, `--tokens` tokens an answer; each turn sends the whole conversation so far, as
chat clients do. Four ways:

- panel: as shipped; the conversation's earlier turns are in its slot (any-prefix reuse, jobs/engine/sequences.py);
- panel, cache lost: another person's short request runs before each turn and takes the slot;
- llama-server: `cache_prompt` on (its default);
- llama-server, no cache: `cache_prompt` false, every prompt read whole.

Per turn: the prompt's tokens and each way's time to first token; then the medians over the last half of the
turns (where the conversation is long) and their ratios.

    .venv/bin/python bench/conversation_turns.py [--turns 20] [--tokens 32] [--ctx 4096]
"""

import argparse
import http.client
import json
import signal
import statistics
import sys
import time

from llama_anchor import llama_server
from scratch_panel import scratch_panel

WAYS = ("panel", "panel, cache lost", "llama-server", "llama-server, no cache")
QUESTION = ("Turn {n}: we are planning a walking holiday along the coast of Scotland. Tell me one more thing to "
            "pack or to see, in two sentences.")
OTHER = "Someone else asks: name a colour and a fruit of that colour. ({n})"


def streamed(port: int, body: dict, headers: dict) -> tuple[float, str, int]:
    """(ms to the first content chunk, the answer's text, its prompt tokens) of one streamed chat request."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=900)
    body = {**body, "stream": True, "stream_options": {"include_usage": True}}
    started, first, text, prompt_tokens = time.monotonic(), None, [], 0
    try:
        connection.request("POST", "/v1/chat/completions", body=json.dumps(body),
                           headers={"Content-Type": "application/json", **headers})
        response = connection.getresponse()
        if response.status != 200:
            raise SystemExit(f"HTTP {response.status}: {response.read(300)!r}")
        for raw in response:
            line = raw.strip()
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if "error" in chunk:
                raise SystemExit(f"error: {chunk['error']}")
            if chunk.get("usage"):
                prompt_tokens = chunk["usage"]["prompt_tokens"]
            for choice in chunk.get("choices", []):
                if choice.get("delta", {}).get("content"):
                    first = first or time.monotonic()
                    text.append(choice["delta"]["content"])
    finally:
        connection.close()
    if first is None:
        raise SystemExit("an answer without text")
    return (first - started) * 1000, "".join(text), prompt_tokens


def converse(port: int, model: str, way: str, args, headers: dict) -> list[tuple[float, int]]:
    """(TTFT ms, prompt tokens) of each turn of one conversation."""
    messages, found = [{"role": "system", "content": "You are a helpful travel guide."}], []
    extra = {"cache_prompt": False} if way == "llama-server, no cache" else {}
    for n in range(1, args.turns + 1):
        if way == "panel, cache lost":
            streamed(port, {"model": model, "max_tokens": 1, "temperature": 0,
                            "messages": [{"role": "user", "content": OTHER.format(n=n)}]}, headers)
        messages.append({"role": "user", "content": QUESTION.format(n=n)})
        ttft, text, prompt_tokens = streamed(port, {"model": model, "max_tokens": args.tokens, "temperature": 0,
                                                    "messages": messages, **extra}, headers)
        messages.append({"role": "assistant", "content": text})
        found.append((ttft, prompt_tokens))
        print(f"  {way}: turn {n}, {prompt_tokens} prompt tokens, first token after {ttft:.0f} ms", flush=True)
    return found


def report(found: dict, args) -> None:
    print(f"\n3 simulated laptops (1 Gbit, SSH tunnels, even split), bundled model, one slot, {args.ctx} tokens, "
          f"greedy, {args.tokens} tokens an answer; time to first token in ms\n")
    print("| turn | prompt tokens | " + " | ".join(WAYS) + " |")
    print("|---:|---:|" + "---:|" * len(WAYS))
    for turn in range(args.turns):
        print(f"| {turn + 1} | {found['panel'][turn][1]} | "
              + " | ".join(f"{found[way][turn][0]:.0f}" for way in WAYS) + " |")
    late = slice(args.turns // 2, None)
    medians = {way: statistics.median(ttft for ttft, _ in found[way][late]) for way in WAYS}
    print(f"\nTurns {args.turns // 2 + 1}–{args.turns}, median TTFT: "
          + ", ".join(f"{way} {ms:.0f} ms" for way, ms in medians.items()))
    print(f"panel / llama-server: **{medians['panel'] / medians['llama-server']:.2f}×**; panel with its cache / "
          f"without: **{medians['panel'] / medians['panel, cache lost']:.2f}×**; llama-server with / without: "
          f"**{medians['llama-server'] / medians['llama-server, no cache']:.2f}×**")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--ctx", type=int, default=4096)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with scratch_panel() as panel:
        from clusterpanel.accounts.models import ApiToken, User
        from models_app.library.adding import ensure_bundled

        deployment = panel.deploy(ensure_bundled(), ctx=args.ctx, slots=1, load_within=600)
        headers = {"Authorization": f"Bearer {ApiToken.issue(User.objects.get(username='bench'), 'bench')[1]}"}
        with llama_server(deployment, 1) as anchor:
            found = {}
            for way in WAYS:
                port, model = ((panel.port, f"deployment-{deployment.pk}") if way.startswith("panel")
                               else (anchor, "anchor"))
                found[way] = converse(port, model, way, args, headers)
        report(found, args)


if __name__ == "__main__":
    main()
