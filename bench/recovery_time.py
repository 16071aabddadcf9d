"""What a laptop's death costs a chat, and what answers run at afterwards, through the panel's whole path.

Each round deploys the bundled model afresh over N simulated laptops (1 Gbit, SSH tunnels, even split) and
then, in the same run:

1. an answer before anything dies (tokens/s);
2. the same request again, with `kill -9` of the second laptop's rpc-server after 10 tokens (the supervisor
   restarts it within seconds): the time from the kill to each step the deployment shows (the job failed
   naming the laptop; degraded, re-planned and ready again when recovery re-plans; the engine loading and
   loaded; the retried job's first token), the retried answer's tokens/s, and whether recovery kept the laptop
   whose rpc-server came back (and re-planned, or reloaded the same plan);
3. the recovered plan deployed afresh beside it (same laptops in the same order, same layer counts, servers on
   other ports), and the same request answered by the recovered and the fresh deployment in turn, so that a
   machine whose load drifts (other processes) weighs on both alike.

    .venv/bin/python bench/recovery_time.py [--laptops 8] [--rounds 1] [--tokens 96] [--pairs 3]
"""

import argparse
import shutil
import statistics
import threading
import time

from scratch_panel import scratch_panel

PROMPT = "Write a long story about a laptop."  # the bundled model writes past 300 tokens greedily


def wait_for(check, within: float, what: str):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise SystemExit(f"{what} did not happen within {within} s")


def submit(deployment, tokens: int):
    from jobs.models import Job, JobKind
    from jobs.queue import queueing

    return queueing.submit(Job(kind=JobKind.CHAT, deployment=deployment,
                               messages=[{"role": "user", "content": PROMPT}],
                               params={"temperature": 0.0, "top_p": 1.0, "top_k": 40, "repeat_penalty": 1.0,
                                       "max_tokens": tokens, "stop": []}))


def finished(job_pk: int, within: float = 600):
    from jobs.models import Job

    return wait_for(lambda: (job := Job.objects.get(pk=job_pk)).is_finished and job, within, f"job {job_pk}")


def speed(job) -> float:
    """Tokens per second after the first token (the decode rate a reader sees)."""
    if job.status != "succeeded" or not job.first_token or job.completion_tokens < 20:
        raise SystemExit(f"job {job.pk} did not succeed: {job.status} {job.error}")
    return (job.completion_tokens - 1) / (job.finished - job.first_token).total_seconds()


def answer_speed(deployment, tokens: int) -> float:
    return speed(finished(submit(deployment, tokens).pk))


class Steps:
    """When the deployment first moved to each status and engine state, watched from a thread of its own."""

    def __init__(self, pk: int) -> None:
        self.pk, self.seen, self.done = pk, {}, threading.Event()
        self.thread = threading.Thread(target=self.watch, daemon=True)
        self.thread.start()

    def watch(self) -> None:
        from django.db import connection

        from models_app.models import Deployment

        last = None
        while not self.done.wait(0.05):
            status, engine = Deployment.objects.filter(pk=self.pk).values_list("status", "engine").get()
            now = (status, f"engine {(engine or {}).get('state')}")
            for step, before in zip(now, last or now, strict=True):
                if step != before:
                    self.seen.setdefault(step, time.time())
            last = now
        connection.close()

    def stop(self) -> dict:
        self.done.set()
        self.thread.join()
        return self.seen


def deploy_plan(model, nodes, counts: list[int]):
    """The recovered plan deployed afresh: same laptops in the same order, same layer counts, engine loaded."""
    from models_app.deploying import deploy
    from models_app.models import Deployment

    deployment = deploy.create(model, nodes, 1024, mode="manual", manual=counts)
    deploy.prepare(deployment)
    deployment.refresh_from_db()
    if deployment.status != "ready":
        raise SystemExit(f"the fresh deployment failed: {deployment.status_detail}")
    wait_for(lambda: Deployment.objects.get(pk=deployment.pk).engine.get("state") == "ready", 600, "its engine")
    return deployment


def stopped(*deployments) -> None:
    """Stop them and wait for the supervisor to stop their servers and engines."""
    from models_app.deploying import deploy
    from nodes.models import RpcServer, ServerStatus

    for deployment in deployments:
        deploy.stop(deployment)
    servers = RpcServer.objects.filter(stage__deployment__in=deployments)
    wait_for(lambda: not servers.exclude(status=ServerStatus.STOPPED).exists(), 120, "their servers to stop")
    time.sleep(3)  # the supervisor's next tick ends their engine workers


def kill_and_recover(deployment, tokens: int) -> dict:
    from jobs.models import Job, JobStatus
    from jobs.queue import stream
    from models_app.models import Deployment
    from nodes.remote import ssh

    job = submit(deployment, tokens)
    wait_for(lambda: sum(e.get("event") == "token" for e in stream.kept(job.pk)) >= 10, 120, "generation")
    victim = deployment.stages.select_related("node", "server").get(position=1)
    steps = Steps(deployment.pk)
    killed = time.time()
    ssh.run(victim.node.ssh_target(), ["kill", "-9", str(victim.server.pid)])
    failed = wait_for(lambda: Job.objects.get(pk=job.pk).status == JobStatus.FAILED and time.time(), 120,
                      "the job to fail")
    retry = wait_for(lambda: Job.objects.filter(retry_of=job).first(), 300, "the retry")
    first = wait_for(lambda: next((e["t"] for e in stream.kept(retry.pk) if e.get("event") == "token"), None),
                     600, "the retry's first token")
    retried = speed(finished(retry.pk))
    seen = steps.stop()
    recovered = Deployment.objects.get(pk=deployment.pk)
    names = {stage.node.name for stage in recovered.stages.select_related("node")}
    return {"retried": retried, "kept": victim.node.name in names, "laptops after": len(names),
            "re-planned": recovered.revision > deployment.revision,
            "the job failed, naming the laptop": failed - killed,
            **{label: seen[step] - killed for step, label in STEPS if step in seen},
            "the retried job's first token": first - killed}


STEPS = (("degraded", "the deployment degraded"), ("preparing", "re-planned, waiting for servers"),
         ("ready", "ready again"), ("engine loading", "the new engine loading"),
         ("engine ready", "the new engine loaded"))


def one_round(panel, model, tokens: int, pairs: int) -> dict:
    from models_app.models import Deployment

    deployment = panel.deploy(model, ctx=1024)
    row = {"before": answer_speed(deployment, tokens), **kill_and_recover(deployment, tokens)}
    recovered = Deployment.objects.get(pk=deployment.pk)
    stages = list(recovered.stages.select_related("node").order_by("position"))
    counts = [stage["count"] for stage in recovered.plan["stages"]]  # the head's first, then each laptop's
    fresh = deploy_plan(model, [stage.node for stage in stages], counts)
    row["recovered"], row["fresh"] = [], []
    for _ in range(pairs):  # in turn: drifting load on the machine weighs on both alike
        row["recovered"].append(answer_speed(recovered, tokens))
        row["fresh"].append(answer_speed(fresh, tokens))
    stopped(recovered, fresh)
    return row


def median(values) -> float:
    return statistics.median(values)


def report(rows: list[dict], laptops: int, tokens: int, pairs: int) -> None:
    print(f"\nBundled model over {laptops} simulated laptops (1 Gbit, SSH tunnels, even split, ctx 1024), "
          f"greedy answers of {tokens} tokens; rpc-server of the second laptop killed with SIGKILL after 10 "
          f"tokens; {len(rows)} round(s)\n")
    print("| from the kill to | median s | min s | max s |")
    print("|---|---:|---:|---:|")
    labels = ["the job failed, naming the laptop", *(label for _, label in STEPS), "the retried job's first token"]
    for label in labels:
        values = [row[label] for row in rows if label in row]
        if values:
            print(f"| {label} | {median(values):.1f} | {min(values):.1f} | {max(values):.1f} |")
    fresh = median(value for row in rows for value in row["fresh"])
    print("\n| answer | tokens/s (median) | vs a fresh deployment of the recovered plan |")
    print("|---|---:|---:|")
    for key, label in (("before", "before the kill (fresh deployment over all laptops)"),
                       ("retried", "the retried answer, right after recovery"),
                       ("recovered", f"the recovered deployment, {pairs} answers in turn with the fresh one"),
                       ("fresh", f"a fresh deployment of the recovered plan, {pairs} answers")):
        values = [value for row in rows for value in (row[key] if isinstance(row[key], list) else [row[key]])]
        print(f"| {label} | {median(values):.1f} | {median(values) / fresh:.2f} |")
    kept, re_planned = sum(row["kept"] for row in rows), sum(row["re-planned"] for row in rows)
    print(f"\nRecovery kept the laptop whose rpc-server came back in {kept} of {len(rows)} round(s) and "
          f"re-planned in {re_planned}; laptops after recovery: "
          f"{', '.join(str(row['laptops after']) for row in rows)}.")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--laptops", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--tokens", type=int, default=96)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--logs", help="copy the panel's logs (its engines') here at the end")
    args = parser.parse_args()
    rows = []
    with scratch_panel(laptops=args.laptops, name="brecov", subnet="10.242.0.0/24") as panel:
        from models_app.library.adding import ensure_bundled

        try:
            for _ in range(args.rounds):
                rows.append(one_round(panel, ensure_bundled(), args.tokens, args.pairs))
        finally:
            if args.logs:
                shutil.copytree(panel.data / "logs", args.logs, dirs_exist_ok=True)
    report(rows, args.laptops, args.tokens, args.pairs)


if __name__ == "__main__":
    main()
