"""Where one person's first token spends its time: the panel against llama.cpp's own server on the same split.

A whole panel on a scratch data folder with three simulated laptops (1 Gbit links, SSH tunnels), the bundled
model deployed over them (even split, `--slots` sequences) and llama-server with rpc-servers of its own on the
same laptops and the same plan (bench/llama_anchor.py). One client at a time: each round sends each system, in
an order that rotates, one streamed and one whole (not streamed) /v1/chat/completions request, greedy, each with
a prompt of its own (so neither server finds it cached), `--tokens` tokens at most.

Per system: time to first token (streamed: from just before the request to the first content chunk), the gaps
between tokens as the client saw them, and a whole answer's time; p50/p95 over rounds, and the panel minus
llama-server taken round by round, then the median. For the panel's streamed requests, a timeline from its job
rows (the same clock: one machine): request sent → job row made (web server: sign-in, parsing, admission,
routing) → claimed by the engine (commit, message, claim) → first token made (template, prompt read, first
step) → first token seen by the client (Redis, web server, HTTP).

    .venv/bin/python bench/first_token.py [--rounds 12] [--tokens 32] [--slots 8]
"""

import argparse
import http.client
import json
import signal
import statistics
import sys
import time
from collections import defaultdict

from llama_anchor import llama_server
from scratch_panel import scratch_panel
from streaming_clients import percentile, prompt, stream_chat

STAGES = ("request → job row", "row → claimed", "claimed → first token made", "made → seen by the client")


def whole(port: int, body: dict, headers: dict[str, str]) -> float:
    """Seconds from the request to the whole answer."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=900)
    started = time.monotonic()
    try:
        connection.request("POST", "/v1/chat/completions", body=json.dumps({**body, "stream": False}),
                           headers={"Content-Type": "application/json", **headers})
        response = connection.getresponse()
        answer = response.read()
        if response.status != 200:
            raise SystemExit(f"HTTP {response.status}: {answer[:300]!r}")
    finally:
        connection.close()
    return time.monotonic() - started


def timeline(job, sent_at: float, seen_at: float) -> list[float]:
    """Milliseconds each stage took, from the job row's own times and the client's."""
    created, started, made = (t.timestamp() for t in (job.created, job.started, job.first_token))
    points = [sent_at, created, started, made, seen_at]
    return [(b - a) * 1000 for a, b in zip(points, points[1:], strict=False)]


def rounds(ports: dict, models: dict, headers: dict, args) -> tuple[dict, list]:
    from jobs.models import Job

    found, stages = defaultdict(list), []
    systems = list(ports)
    for system in systems:  # a short answer each first: nothing measured pays for a cold start
        whole(ports[system], {"model": models[system], "max_tokens": 4, "messages": [
            {"role": "user", "content": "Hello."}]}, headers)
    for round_no in range(args.rounds):
        order = systems[round_no % len(systems):] + systems[:round_no % len(systems)]
        for index, system in enumerate(order):
            body = {"model": models[system], "stream": True, "max_tokens": args.tokens, "temperature": 0,
                    "messages": [{"role": "user", "content": prompt(round_no, index)}]}
            sent_wall, seen = time.time(), stream_chat(ports[system], body, headers)
            if seen.error or not seen.times:
                raise SystemExit(f"{system}: {seen.error or 'no tokens'}")
            found[system, "ttft"].append((seen.times[0] - seen.started) * 1000)
            found[system, "gaps"].extend((b - a) * 1000 for a, b in zip(seen.times, seen.times[1:], strict=False))
            if system == "panel":
                job = Job.objects.latest("pk")
                stages.append(timeline(job, sent_wall, sent_wall + seen.times[0] - seen.started))
            body["messages"] = [{"role": "user", "content": prompt(round_no, index + 10)}]
            found[system, "whole"].append(whole(ports[system], body, headers) * 1000)
        print(f"  round {round_no}: " + ", ".join(f"{s} TTFT {found[s, 'ttft'][-1]:.0f} ms" for s in systems),
              flush=True)
    return found, stages


def report(found: dict, stages: list, args) -> None:
    print(f"\n3 simulated laptops (1 Gbit, SSH tunnels, even split), bundled model, slots {args.slots}, "
          f"{args.rounds} rounds, one client, greedy, {args.tokens} tokens at most\n")
    print("| system | TTFT ms p50 | TTFT ms p95 | inter-token ms p50 | inter-token ms p95 "
          "| whole answer ms p50 | whole answer ms p95 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for system in ("panel", "llama-server"):
        row = [percentile(found[system, kind], share) for kind in ("ttft", "gaps", "whole") for share in (0.5, 0.95)]
        print(f"| {system} | " + " | ".join(f"{value:.1f}" for value in row) + " |")
    for kind, name in (("ttft", "time to first token"), ("whole", "whole answer")):
        extra = [a - b for a, b in zip(found["panel", kind], found["llama-server", kind], strict=False)]
        print(f"\npanel − llama-server, {name} (round by round, median): **{statistics.median(extra):+.1f} ms**")
    print("\n| the panel's streamed request | ms p50 | ms p95 |")
    print("|---|---:|---:|")
    for at, name in enumerate(STAGES):
        spent = [row[at] for row in stages]
        print(f"| {name} | {percentile(spent, 0.5):.1f} | {percentile(spent, 0.95):.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--ctx", type=int, default=1024)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with scratch_panel() as panel:
        from clusterpanel.accounts.models import ApiToken, User
        from models_app.library.adding import ensure_bundled

        deployment = panel.deploy(ensure_bundled(), ctx=args.ctx, slots=args.slots, load_within=600)
        headers = {"Authorization": f"Bearer {ApiToken.issue(User.objects.get(username='bench'), 'bench')[1]}"}
        with llama_server(deployment, args.slots) as anchor:
            ports = {"panel": panel.port, "llama-server": anchor}
            models = {"panel": f"deployment-{deployment.pk}", "llama-server": "anchor"}
            found, stages = rounds(ports, models, headers, args)
        report(found, stages, args)


if __name__ == "__main__":
    main()
