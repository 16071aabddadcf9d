"""One person's decoding speed with speculative decoding: the panel without drafts, with n-gram drafting, with a
draft model on the head (cut from the bundled model's first layers by scripts/cut_draft.py) and with the bundled
model itself as its own draft (the ceiling: every guess kept), against llama.cpp's own server plain, with its
`--spec-type ngram-simple` and with the same cut draft (`--model-draft`), on the same split.

A whole panel on a scratch data folder with three simulated laptops (1 Gbit links, SSH tunnels), the bundled
model deployed over them (even split, one slot); llama-server with rpc-servers of its own on the same laptops
and the same plan (bench/llama_anchor.py), plain, with n-gram drafting, with the draft. One client at a time, greedy,
streamed, `--tokens` tokens at most, on prompts that copy (a code edit, a summary quoting its text, a list): per
system, tokens/s from the request to the last token and from the first token to the last (decode alone), the
medians over rounds; ratios round by round, then the median. The panel's drafting is switched on and off
between requests as an admin would (its engine takes it before the next job). How many of the panel's greedy
answers with drafts are token for token its answers without, and the share of drafts kept, from the job rows.

    .venv/bin/python bench/speculative.py [--rounds 3] [--tokens 256] [--draft 8] [--cut-layers 20] [--laptop-cpus 0.25]

A long pipeline, where each token's trip costs most: `--deep-layers 80 --laptops 15` deploys, instead of the
bundled model, a qwen2 test model of 80 small layers (random f16 weights, SmolLM2's tokenizer, as the lab-of-many
journey's) over 15 laptops; its cut draft keeps its first `--cut-layers`.
"""

import argparse
import signal
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

from llama_anchor import llama_server
from scratch_panel import scratch_panel
from streaming_clients import stream_chat

CODE = '''def total_price(items, tax):
    total = 0
    for item in items:
        total = total + item["price"] * item["count"]
    total = total * (1 + tax)
    return round(total, 2)
'''
TEXT = ("The lighthouse at Cape Wrath was built in 1828 by Robert Stevenson. It stands on a cliff 120 metres above "
        "the sea, and its light can be seen for 22 nautical miles. The keepers lived in cottages beside the tower "
        "until 1998, when the light was automated. Today the buildings belong to the Northern Lighthouse Board.")
PROMPTS = {
    "code edit": f"Rename the variable `total` to `amount` in this function and show the whole function:\n\n{CODE}",
    "summary": f"Summarise this text in three sentences, keeping its names and numbers:\n\n{TEXT}",
    "list": "List the months of the year, one per line, each as: <number>. <name> has <days> days.",
}


def measured(port: int, model: str, prompt: str, tokens: int, headers: dict) -> dict:
    body = {"model": model, "stream": True, "max_tokens": tokens, "temperature": 0,
            "stream_options": {"include_usage": True}, "messages": [{"role": "user", "content": prompt}]}
    seen = stream_chat(port, body, headers)
    if seen.error or len(seen.times) < 2:
        raise SystemExit(f"{model}: {seen.error or 'fewer than two tokens'}")
    return {"rate": seen.tokens / (seen.times[-1] - seen.started),
            "decode": (seen.tokens - 1) / (seen.times[-1] - seen.times[0]), "tokens": seen.tokens}


PANEL = {"panel": None, "panel+ngram": None, "panel+cut": "cut-draft", "panel+self": "self"}  # label → its draft


def panel_run(panel, deployment, label: str, prompt: str, args, headers) -> tuple[dict, object]:
    from jobs.models import Job
    from models_app.deploying import deploy
    from models_app.models import GgufModel

    named = PANEL[label]
    draft = deployment.model if named == "self" else GgufModel.objects.get(name=named) if named else None
    deploy.set_drafting(deployment, args.draft if label != "panel" else 0, draft)
    measured(panel.port, f"deployment-{deployment.pk}", "Hello.", 4, headers)  # a draft model loads here, once
    found = measured(panel.port, f"deployment-{deployment.pk}", prompt, args.tokens, headers)
    return found, Job.objects.latest("pk")


def rounds(panel, deployment, anchor_port: int, anchor: str, args, headers, found, answers) -> None:
    """Each round, each prompt: the panel's ways and llama-server `anchor`, in turn."""
    for round_no in range(args.rounds):
        for name, prompt in PROMPTS.items():
            runs = [*PANEL, anchor]
            shift = round_no % len(runs)
            for system in runs[shift:] + runs[:shift]:
                if system == anchor:
                    found[system, name].append(measured(anchor_port, "anchor", prompt, args.tokens, headers))
                    continue
                result, job = panel_run(panel, deployment, system, prompt, args, headers)
                found[system, name].append({**result, "drafted": job.drafted_tokens, "accepted": job.accepted_tokens})
                answers[system, name].append(job.output)
            print(f"  round {round_no} {name}: " + ", ".join(
                f"{s} {found[s, name][-1]['rate']:.1f} ({found[s, name][-1]['tokens']} tokens"
                + (f", {found[s, name][-1]['accepted']}/{found[s, name][-1]['drafted']} kept" if s in PANEL else "")
                + ")" for s in runs), flush=True)


ANCHORS = ["llama-server", "llama-server ngram-simple", "llama-server cut draft"]


def report(found: dict, answers: dict, args) -> None:
    systems = [*PANEL, *args.anchors]
    held = f", each held to {args.laptop_cpus} of a core" if args.laptop_cpus else ""
    model = f"a {args.deep_layers}-layer test model (random weights)" if args.deep_layers else "bundled model"
    print(f"\n{args.laptops} simulated laptops (1 Gbit, SSH tunnels, even split{held}), {model}, one person, "
          f"greedy, {args.tokens} tokens at most, {args.rounds} rounds; drafts up to {args.draft} tokens a step; "
          f"the cut draft keeps the first {args.cut_layers} of {args.deep_layers or 30} layers\n")
    print("| prompt | " + " | ".join(f"{s} tok/s" for s in systems) + " |")
    print("|---|" + "---:|" * len(systems))
    for name in PROMPTS:
        print(f"| {name} | " + " | ".join(f"{statistics.median(r['rate'] for r in found[s, name]):.1f}"
                                           for s in systems) + " |")
    pairs = [pair for pair in (("panel+ngram", "panel"), ("panel+cut", "panel"), ("panel+self", "panel"),
                               ("panel", "llama-server"), ("panel+ngram", "llama-server ngram-simple"),
                               ("panel+cut", "llama-server cut draft"), ("panel+self", "llama-server"))
             if pair[1] in systems]
    print("\nRatios, paired round by round (median):\n")
    print("| prompt | " + " | ".join(f"{a} / {b}" for a, b in pairs) + " |")
    print("|---|" + "---:|" * len(pairs))
    for name in PROMPTS:
        print(f"| {name} | " + " | ".join(f"**{paired(found, name, a, b):.2f}**" for a, b in pairs) + " |")
    print("\nDecode alone (first token to last), tokens/s; and the panel's drafts kept:\n")
    print("| prompt | " + " | ".join(systems) + " | " + " | ".join(f"{s} kept" for s in list(PANEL)[1:]) + " |")
    print("|---|" + "---:|" * (len(systems) + len(PANEL) - 1))
    for name in PROMPTS:
        kept = []
        for system in list(PANEL)[1:]:
            drafted = sum(r["drafted"] for r in found[system, name])
            kept.append(f"{100 * sum(r['accepted'] for r in found[system, name]) / drafted:.0f}%" if drafted else "-")
        print(f"| {name} | " + " | ".join(f"{statistics.median(r['decode'] for r in found[s, name]):.1f}"
                                           for s in systems) + " | " + " | ".join(kept) + " |")
    for system in list(PANEL)[1:]:
        same = sum(a == b for name in PROMPTS for a, b in zip(answers["panel", name], answers[system, name],
                                                              strict=False))
        total = sum(len(answers["panel", name]) for name in PROMPTS)
        print(f"\nThe panel's greedy answers with {system} token for token its answers without: {same} of {total}")


def paired(found: dict, name: str, top: str, bottom: str) -> float:
    return statistics.median(a["rate"] / b["rate"] for a, b in zip(found[top, name], found[bottom, name],
                                                                    strict=False))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--draft", type=int, default=8)
    parser.add_argument("--ctx", type=int, default=2048)
    parser.add_argument("--cut-layers", type=int, default=20)
    parser.add_argument("--laptops", type=int, default=3)
    parser.add_argument("--deep-layers", type=int, default=0,
                        help="deploy a qwen2 test model of this many small layers instead of the bundled model")
    parser.add_argument("--anchors", nargs="+", default=ANCHORS, choices=ANCHORS,
                        help="the llama-server runs to measure beside (each runs the panel's ways again beside it)")
    parser.add_argument("--laptop-cpus", type=float, default=None,
                        help="hold each laptop to this share of one core (a pipeline slow beside its head, as a "
                             "large model's is; the head and its draft are not held)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    found, answers = defaultdict(list), defaultdict(list)
    with scratch_panel(laptops=args.laptops, laptop_cpus=args.laptop_cpus) as panel:
        from clusterpanel.accounts.models import ApiToken, User
        from models_app.library.adding import ensure_bundled, register_path
        from models_app.library.bundled import bundled_model_path

        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        from scripts.cut_draft import cut

        target = ensure_bundled()
        if args.deep_layers:
            from tests.models_app.gguf_files import write_loadable_model

            deep = write_loadable_model(panel.data / f"deep-{args.deep_layers}.gguf", layers=args.deep_layers,
                                        embd=256, ffn=512)
            target = register_path(deep, name=f"deep-{args.deep_layers}", checksum_now=True)
        cut_path = panel.data / f"cut-{args.cut_layers}.gguf"
        cut(Path(target.path) if args.deep_layers else bundled_model_path(), cut_path, args.cut_layers)
        register_path(cut_path, name="cut-draft", checksum_now=True)
        deployment = panel.deploy(target, ctx=args.ctx, slots=1, load_within=600)
        headers = {"Authorization": f"Bearer {ApiToken.issue(User.objects.get(username='bench'), 'bench')[1]}"}
        for anchor, extra in zip(ANCHORS, ((), (
                "--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "3",
                "--spec-ngram-simple-size-m", str(args.draft)), (
                "--spec-type", "draft-simple", "--model-draft", str(cut_path), "--gpu-layers-draft", "0",
                "--spec-draft-n-max", str(args.draft))),
                                 strict=True):
            if anchor not in args.anchors:
                continue
            with llama_server(deployment, 1, extra) as port:
                measured(port, "anchor", "Hello.", 8, headers)  # nothing measured pays for a cold start
                measured(panel.port, f"deployment-{deployment.pk}", "Hello.", 8, headers)
                started = time.monotonic()
                rounds(panel, deployment, port, anchor, args, headers, found, answers)
                print(f"  {anchor}: {time.monotonic() - started:.0f} s", flush=True)
    report(found, answers, args)


if __name__ == "__main__":
    main()
