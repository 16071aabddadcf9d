"""Many people at once: the panel's engine with `slots` sequences per decode step against llama.cpp's own
server (the anchor: same vendored llama.cpp, same laptops, same plan, -np slots, continuous batching) and
against the panel at slots=1 (one job at a time), with 1 to 16 concurrent OpenAI streaming clients.

A whole panel on a scratch data folder with three simulated laptops (1 Gbit links, SSH tunnels). Per model,
two deployments (slots=S and slots=1, even split, `ctx` tokens per sequence) and llama-server with rpc-servers
of its own on the same laptops, all loaded at once; in each round every client count runs on each system, in
an order that rotates from round to round. Each client streams /v1/chat/completions (`stream: true`,
greedy, `max_tokens` tokens, its own prompt asking for a long essay; there is no ignore_eos, so tokens are
counted as generated, from the usage chunk). Per client count and system: aggregate generated tokens/s
(all tokens over the wall time from the first request to the last token), time to first token and the gaps
between tokens as the clients saw them (p50/p95 over all rounds). Ratios are taken round by round, then the
median. A second table: a batch file of `--batch-lines` lines uploaded to each deployment (jobs.batches.service, as
the REST API does), time until every item is done, slots=1 against slots=S.

llama-server keeps each slot's last prompt and reads only what a new request does not share with it (its
`cache_prompt`, on by default); the panel reads a greedy or seeded request's prompt whole, so that the same
request always gives the same answer (docs/api.md). `--no-prompt-cache` turns llama-server's reuse off, to
compare the two reading the same prompt tokens.

    .venv/bin/python bench/concurrency.py [--rounds 3] [--clients 1 2 4 8 16] [--models bundled qwen2]
                                          [--slots 8] [--systems panel llama-server slots=1] [--quick]
                                          [--no-prompt-cache]
"""

import argparse
import json
import signal
import statistics
import sys
import time
from collections import defaultdict
from contextlib import ExitStack

from llama_anchor import llama_server
from scratch_panel import scratch_panel
from streaming_clients import Measured, measure, percentile, prompt, run_clients

SYSTEMS = ("panel", "llama-server", "slots=1")
MODELS = {"bundled": "SmolLM2 135M Q4_1 (bundled)", "qwen2": "qwen2 test model, 12 layers f16"}
PEOPLE = 16  # clients are people of their own (the queue takes turns by person)


def model_file(name: str, panel):
    from models_app.library.adding import ensure_bundled, register_path

    if name == "bundled":
        return ensure_bundled()
    from tests.models_app.gguf_files import write_loadable_model

    folder = panel.data / "models"
    folder.mkdir(exist_ok=True)
    return register_path(write_loadable_model(folder / "q12.gguf", layers=12), checksum_now=True)


def people() -> list[dict[str, str]]:
    from clusterpanel.accounts.models import ApiToken, Role, User

    users = [User.objects.create_user(f"person{i}", password="bench-password-1", role=Role.USER)
             for i in range(PEOPLE)]
    return [{"Authorization": f"Bearer {ApiToken.issue(user, 'bench')[1]}"} for user in users]


class Targets:
    """Where each system listens and the model id to ask it for."""

    def __init__(self, panel, stack: ExitStack, model, args) -> None:
        self.port, self.model, self.deployments = {}, {}, {}
        if "panel" in args.systems or args.batch_lines:
            self.deployments["panel"] = panel.deploy(model, ctx=args.ctx, slots=args.slots, load_within=600)
        if "slots=1" in args.systems or args.batch_lines or not self.deployments:  # llama-server needs a plan
            self.deployments["slots=1"] = panel.deploy(model, ctx=args.ctx, slots=1, load_within=600)
        for system, deployment in self.deployments.items():
            self.port[system], self.model[system] = panel.port, f"deployment-{deployment.pk}"
        if "llama-server" in args.systems:
            plan_of = next(iter(self.deployments.values()))
            self.port["llama-server"] = stack.enter_context(llama_server(plan_of, args.slots))
            self.model["llama-server"] = "anchor"

    def stop(self) -> None:
        from models_app.deploying import deploy as deploying

        for deployment in self.deployments.values():
            deploying.stop(deployment)


def concurrent_rounds(targets: Targets, args, headers) -> dict:
    """(clients, system) → one Measured per round; systems take turns going first."""
    from django.utils import timezone

    found: dict = defaultdict(list)
    systems = [s for s in SYSTEMS if s in args.systems]
    for system in systems:  # one short answer each first: nothing measured pays for a cold start
        run_clients(targets.port[system], 1, 999, targets.model[system], 8, headers)
    for round_no in range(args.rounds):
        order = systems[round_no % len(systems):] + systems[:round_no % len(systems)]
        for clients in args.clients:
            for system in order:
                extra = {"cache_prompt": False} if system == "llama-server" and args.no_prompt_cache else None
                since = timezone.now()
                streams = run_clients(targets.port[system], clients, round_no, targets.model[system],
                                      args.tokens, headers, extra)
                found[clients, system].append(measure(streams))
                print(f"  round {round_no} {clients:>2} clients {system:<12} "
                      f"{found[clients, system][-1].tokens_per_s:7.1f} tokens/s", flush=True)
                if args.timeline and system in targets.deployments:
                    timeline(targets.deployments[system], since)
    return found


def timeline(deployment, since) -> None:
    """Where each job of the round spent its time before its first token, from the jobs' rows: ms after the
    round's first request reached the database (created, claimed, first token), its prompt tokens, how many of them
    a cached prefix spared, and the engine's time from taking it to sampling its first token."""
    from jobs.models import Job

    jobs = list(Job.objects.filter(deployment=deployment, created__gte=since).order_by("created"))
    if not jobs:
        return
    zero = jobs[0].created

    def ms(moment) -> str:
        return f"{(moment - zero).total_seconds() * 1000:7.0f}" if moment else "      –"

    print("    job  created  claimed  first token  prompt  cached  reading ms")
    for job in jobs:
        reading = f"{job.prompt_seconds * 1000:10.0f}" if job.prompt_seconds is not None else "         –"
        print(f"    {job.pk:>4} {ms(job.created)} {ms(job.started)} {ms(job.first_token)}      "
              f"{job.prompt_tokens or 0:>6} {job.cached_tokens:>7} {reading}", flush=True)


def batch_lines(count: int, tokens: int, round_no: int) -> bytes:
    return "\n".join(json.dumps({"custom_id": f"q{i}", "method": "POST", "url": "/v1/chat/completions", "body": {
        "messages": [{"role": "user", "content": prompt(round_no, i)}], "max_tokens": tokens,
        "temperature": 0}}) for i in range(count)).encode()


def batch_time(deployment, lines: bytes) -> tuple[float, int]:
    """Seconds from the upload to the last item done, and how many items did not succeed."""
    from clusterpanel.accounts.models import User
    from jobs.batches import service as batches
    from jobs.models import JobStatus

    started = time.monotonic()
    batch = batches.from_file(User.objects.get(username="bench"), deployment, "bench.jsonl", lines)
    while not (counted := batches.counts(batch))["finished"]:
        time.sleep(0.2)
    return time.monotonic() - started, counted["total"] - counted[JobStatus.SUCCEEDED]


def batch_rounds(targets: Targets, args) -> dict:
    found: dict = defaultdict(list)
    for round_no in range(args.batch_rounds):
        order = ("slots=1", "panel") if round_no % 2 == 0 else ("panel", "slots=1")
        for system in order:
            took = batch_time(targets.deployments[system], batch_lines(args.batch_lines, args.batch_tokens,
                                                                       100 + round_no))
            found[system].append(took)
            print(f"  batch round {round_no} {system:<8} {took[0]:7.1f} s, {took[1]} not succeeded", flush=True)
    return found


def main() -> None:
    args = arguments()
    # A kill (timeout, a supervisor) still takes down the panel, the laptops and llama-server.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    results, batches = {}, {}
    with scratch_panel() as panel:
        headers = people()
        for name in args.models:
            print(f"{MODELS[name]}: deploying", flush=True)
            with ExitStack() as stack:
                targets = Targets(panel, stack, model_file(name, panel), args)
                if args.rounds:  # --rounds 0: the batch table alone
                    results[name] = concurrent_rounds(targets, args, headers)
                    report(args, {name: results[name]}, {})  # kept in the output even if a later part fails
                if args.batch_lines and name == args.models[0]:
                    batches[name] = batch_rounds(targets, args)
                targets.stop()
    print("\n## All results")
    report(args, results, batches)


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    parser.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS))
    parser.add_argument("--slots", type=int, default=8, help="the panel's slots and llama-server's -np")
    parser.add_argument("--ctx", type=int, default=1024, help="tokens per sequence")
    parser.add_argument("--tokens", type=int, default=128, help="max_tokens of each request")
    parser.add_argument("--batch-lines", type=int, default=200, help="0: no batch table")
    parser.add_argument("--batch-tokens", type=int, default=32, help="max_tokens of each batch line")
    parser.add_argument("--batch-rounds", type=int, default=2)
    parser.add_argument("--no-prompt-cache", action="store_true",
                        help="llama-server reads every prompt whole, as the panel does for greedy requests")
    parser.add_argument("--timeline", action="store_true",
                        help="after each panel round, each job's created, claimed and first-token times")
    parser.add_argument("--quick", action="store_true", help="1 round, 1 and 8 clients, the bundled model, "
                                                             "one batch round each")
    if parser.parse_known_args()[0].quick:  # its values are defaults: options given still win
        parser.set_defaults(rounds=1, clients=[1, 8], models=["bundled"], batch_rounds=1)
    return parser.parse_args()


def report(args, results: dict, batches: dict) -> None:
    label = {"panel": f"panel slots={args.slots}", "llama-server": f"llama-server -np {args.slots}",
             "slots=1": "panel slots=1"}
    print(f"\n3 simulated laptops (1 Gbit, SSH tunnels, even split), {args.rounds} rounds, each client "
          f"{args.tokens} greedy tokens at most, {args.ctx} tokens of context per sequence\n")
    for name, found in results.items():
        print(f"### {MODELS[name]}\n")
        throughput_table(args, found, label)
        latency_table(args, found, label)
    for name, found in batches.items():
        batch_table(args, name, found)


def median_rate(rows: list[Measured]) -> float:
    return statistics.median(r.tokens_per_s for r in rows) if rows else float("nan")


def paired_ratio(found: dict, clients: int, top: str, bottom: str) -> str:
    pairs = list(zip(found.get((clients, top), []), found.get((clients, bottom), []), strict=False))
    ratios = [a.tokens_per_s / b.tokens_per_s for a, b in pairs if b.tokens_per_s]
    return f"**{statistics.median(ratios):.2f}**" if ratios else "–"


def throughput_table(args, found: dict, label: dict) -> None:
    systems = [s for s in SYSTEMS if s in args.systems]
    print("| clients | " + " | ".join(f"{label[s]} tokens/s" for s in systems)
          + " | panel / llama-server | panel / slots=1 |")
    print("|---:|" + "---:|" * (len(systems) + 2))
    for clients in args.clients:
        rates = " | ".join(f"{median_rate(found[clients, s]):.1f}" for s in systems)
        print(f"| {clients} | {rates} | {paired_ratio(found, clients, 'panel', 'llama-server')} | "
              f"{paired_ratio(found, clients, 'panel', 'slots=1')} |")
    print()


def latency_table(args, found: dict, label: dict) -> None:
    print("| clients | system | TTFT ms p50 | TTFT ms p95 | inter-token ms p50 | inter-token ms p95 | "
          "tokens per client | failed |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for clients in args.clients:
        for system in (s for s in SYSTEMS if s in args.systems):
            rows = found[clients, system]
            ttft = [t for r in rows for t in r.ttft_ms]
            gaps = [g for r in rows for g in r.inter_token_ms]
            errors = [e for r in rows for e in r.errors]
            print(f"| {clients} | {label[system]} | {percentile(ttft, 0.5):.0f} | {percentile(ttft, 0.95):.0f} | "
                  f"{percentile(gaps, 0.5):.1f} | {percentile(gaps, 0.95):.1f} | "
                  f"{sum(r.tokens for r in rows) / (clients * len(rows)):.0f} | {len(errors)} |")
    print()
    for (clients, system), rows in found.items():
        for error in sorted({e for r in rows for e in r.errors}):
            print(f"- {clients} clients, {label[system]}: {error}")


def batch_table(args, name: str, found: dict) -> None:
    print(f"\nA {args.batch_lines}-line batch file ({args.batch_tokens} tokens at most per line, greedy), "
          f"{MODELS[name]}, upload to last item done, {args.batch_rounds} rounds alternating:\n")
    print("| slots | seconds (median) | not succeeded |\n|---:|---:|---:|")
    for system, slots in (("slots=1", 1), ("panel", args.slots)):
        rows = found[system]
        print(f"| {slots} | {statistics.median(s for s, _ in rows):.1f} | {sum(n for _, n in rows)} |")
    ratios = [one[0] / many[0] for one, many in zip(found["slots=1"], found["panel"], strict=True)]
    print(f"\nslots=1 / slots={args.slots}, round by round: **{statistics.median(ratios):.2f}×** (target ≥ 2)")


if __name__ == "__main__":
    main()
