"""16 streaming clients on two replicas of a model against the same clients on one replica: aggregate tokens/s
and time to first token, side by side in one run.

A whole panel on a scratch data folder (bench/scratch_panel.py) with 2 × `--laptops-per-replica` simulated
laptops; the bundled model deployed twice, each replica on its own laptops (even split, `--slots` slots). The
"2 replicas" system asks for the model by name, so the panel routes each request to the replica that will
answer soonest (jobs/queue/routing.py); the "1 replica" system asks for `deployment-<id>` of the first replica
only. The same laptops stay loaded throughout; the systems take turns going first, round by round. Each client
streams /v1/chat/completions (greedy, `--tokens` tokens at most, its own long-essay prompt, a person of its own);
tokens/s is every token over the wall time from the first request to the last token (bench/streaming_clients.py).
Ratios are taken round by round, then the median. The last column says how the routed requests were split.

    .venv/bin/python bench/replicas.py [--laptops-per-replica 3] [--clients 16] [--rounds 3] [--slots 8]
                                       [--tokens 128]
    .venv/bin/python bench/replicas.py --smallest   # 1 laptop per replica, 1 round, 32 tokens
"""

import argparse
import signal
import statistics
import sys
from collections import Counter, defaultdict

from scratch_panel import scratch_panel
from streaming_clients import Measured, measure, percentile, run_clients

SYSTEMS = ("2 replicas", "1 replica")


def people(count: int) -> list[dict[str, str]]:
    """A person and a token per client: the queue takes turns by person, as in a lab."""
    from clusterpanel.accounts.models import ApiToken, Role, User

    users = [User.objects.create_user(f"person{i}", password="bench-password-1", role=Role.USER)
             for i in range(count)]
    return [{"Authorization": f"Bearer {ApiToken.issue(user, 'bench')[1]}"} for user in users]


def replicas(panel, args) -> list:
    from models_app.library.adding import ensure_bundled

    model, size = ensure_bundled(), args.laptops_per_replica
    return [panel.deploy(model, nodes=panel.nodes[n * size:(n + 1) * size], ctx=args.ctx, slots=args.slots,
                         load_within=600) for n in range(2)]


def split(since: int) -> dict[int, int]:
    """Requests made after job `since`, by the deployment that first took them."""
    from jobs.models import Job

    first = {}
    for pk, deployment, params in Job.objects.filter(pk__gt=since, retry_of__isnull=True).values_list(
            "pk", "deployment", "params"):
        moves = (params.get("routing") or {}).get("moves") or []
        first[pk] = moves[0]["from"] if moves else deployment
    return dict(Counter(first.values()))


def rounds(panel, deployments, args, headers) -> tuple[dict, list]:
    from jobs.models import Job

    asked = {"2 replicas": deployments[0].model.name, "1 replica": f"deployment-{deployments[0].pk}"}
    for system in SYSTEMS:  # one short answer each first: nothing measured pays for a cold start
        run_clients(panel.port, 1, 999, asked[system], 8, headers)
    found, splits = defaultdict(list), []
    for round_no in range(args.rounds):
        order = SYSTEMS if round_no % 2 == 0 else SYSTEMS[::-1]
        for system in order:
            since = Job.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
            found[system].append(measure(run_clients(panel.port, args.clients, round_no, asked[system],
                                                     args.tokens, headers)))
            if system == "2 replicas":
                splits.append(split(since))
            print(f"  round {round_no} {system:<10} {found[system][-1].tokens_per_s:7.1f} tokens/s", flush=True)
    return found, splits


def report(args, found: dict, splits: list, deployments) -> None:
    print(f"\n{args.clients} streaming clients, {args.rounds} rounds, each client {args.tokens} greedy tokens at "
          f"most; the bundled model, {args.laptops_per_replica} simulated laptops per replica (1 Gbit, SSH "
          f"tunnels, even split), {args.slots} slots per replica, {args.ctx} tokens of context per sequence\n")
    print("| system | tokens/s (median) | TTFT ms p50 | TTFT ms p95 | tokens per client | failed |")
    print("|---|---:|---:|---:|---:|---:|")
    for system in SYSTEMS:
        rows: list[Measured] = found[system]
        ttft = [t for r in rows for t in r.ttft_ms]
        print(f"| {system} | {statistics.median(r.tokens_per_s for r in rows):.1f} | {percentile(ttft, 0.5):.0f} | "
              f"{percentile(ttft, 0.95):.0f} | {sum(r.tokens for r in rows) / (args.clients * len(rows)):.0f} | "
              f"{sum(len(r.errors) for r in rows)} |")
    ratios = [two.tokens_per_s / one.tokens_per_s
              for two, one in zip(found["2 replicas"], found["1 replica"], strict=True) if one.tokens_per_s]
    print(f"\n2 replicas / 1 replica, aggregate tokens/s, round by round: "
          f"**{statistics.median(ratios):.2f}×** (the issue's target: ≥ 1.8)")
    names = {deployment.pk: f"#{deployment.pk}" for deployment in deployments}
    print("Routed requests per replica, round by round: "
          + "; ".join(", ".join(f"{names.get(pk, pk)} {n}" for pk, n in sorted(s.items())) for s in splits))
    for system in SYSTEMS:
        for error in sorted({e for r in found[system] for e in r.errors}):
            print(f"- {system}: {error}")


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--laptops-per-replica", type=int, default=3)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--slots", type=int, default=8, help="slots per replica")
    parser.add_argument("--ctx", type=int, default=1024, help="tokens per sequence")
    parser.add_argument("--tokens", type=int, default=128, help="max_tokens of each request")
    parser.add_argument("--smallest", action="store_true", help="1 laptop per replica, 1 round, 32 tokens")
    if parser.parse_known_args()[0].smallest:  # its values are defaults: options given still win
        parser.set_defaults(laptops_per_replica=1, rounds=1, tokens=32)
    return parser.parse_args()


def main() -> None:
    args = arguments()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a kill still takes the panel and laptops down
    with scratch_panel(laptops=2 * args.laptops_per_replica, name="brepl", subnet="10.215.0.0/24") as panel:
        headers = people(args.clients)
        print("deploying two replicas", flush=True)
        deployments = replicas(panel, args)
        found, splits = rounds(panel, deployments, args, headers)
        report(args, found, splits, deployments)


if __name__ == "__main__":
    main()
