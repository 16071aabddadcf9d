"""How long a chat is interrupted when a laptop dies: from `kill -9` of one laptop's rpc-server mid-generation
to the first token of the retried job, through the panel's whole path (the engine's child aborts, its
successor names the laptop, the deployment is re-planned on the two laptops left, pre-seeded, the engine
reloads, the job is retried). Each round deploys afresh over three simulated laptops on 1 Gbit links.

    .venv/bin/python bench/recovery_time.py [--rounds 3]
"""

import argparse
import statistics
import time

from scratch_panel import scratch_panel


def wait_for(check, within: float, what: str):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise SystemExit(f"{what} did not happen within {within} s")


def one_round(panel, model) -> dict:
    from jobs.models import Job, JobKind, JobStatus
    from jobs.queue import queueing, stream
    from models_app import deploy
    from nodes import ssh

    deployment = panel.deploy(model, ctx=1024)
    job = queueing.submit(Job(kind=JobKind.CHAT, deployment=deployment, messages=[
        {"role": "user", "content": "Write a long story about a laptop."}],
        params={"temperature": 0.0, "top_p": 1.0, "top_k": 40, "repeat_penalty": 1.0, "max_tokens": 1500,
                "stop": []}))
    wait_for(lambda: len(stream.kept(job.pk)) > 10, 60, "generation")
    victim = deployment.stages.select_related("node", "server").get(position=1)
    killed = time.time()
    ssh.run(victim.node.ssh_target(), ["kill", "-9", str(victim.server.pid)])
    wait_for(lambda: Job.objects.get(pk=job.pk).status == JobStatus.FAILED, 60, "the job to fail")
    failed = time.time()
    retry = wait_for(lambda: Job.objects.filter(retry_of=job).first(), 180, "the retry")
    first = wait_for(lambda: next((e["t"] for e in stream.kept(retry.pk) if e.get("event") == "token"), None),
                     300, "the retry's first token")
    deploy.stop(deployment)
    return {"to failed": failed - killed, "to first token": first - killed}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rows = []
    with scratch_panel(name="brecov", subnet="10.242.0.0/24") as panel:
        from models_app.library import ensure_bundled

        for _ in range(args.rounds):
            rows.append(one_round(panel, ensure_bundled()))
            time.sleep(3)  # the supervisor stops the old servers and engine
    print(f"\nBundled model over 3 simulated laptops (1 Gbit, SSH tunnels, even split, ctx 1024), "
          f"rpc-server of the second laptop killed with SIGKILL after 10 tokens; {args.rounds} rounds\n")
    print("| from the kill to | median s | min s | max s |")
    print("|---|---:|---:|---:|")
    for key in ("to failed", "to first token"):
        values = [row[key] for row in rows]
        label = "the job failed, naming the laptop" if key == "to failed" else "the retried job's first token"
        print(f"| {label} | {statistics.median(values):.1f} | {min(values):.1f} | {max(values):.1f} |")


if __name__ == "__main__":
    main()
