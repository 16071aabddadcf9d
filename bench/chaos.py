"""Everything at once and everything failing (issue 35): people streaming answers through /v1 with the real
`openai` client (every third hanging up on purpose, sampled and greedy answers mixed), a script on /api/jobs/,
and an OpenAI batch, while a fault lands every FAULT_EVERY seconds, in turn: an rpc-server killed mid-answer, a
laptop's server frozen, the panel's Redis restarted, the engine's worker killed. Then it checks what nothing may
lose: no answer spliced (what each client was told is the text of the job that answered it, or the stream ended
with an error saying so), every failure named in words, every batch line answered exactly once, the deployment
ready again, and it measures how long each fault took to recover from.

tests/jobs/recovery/test_chaos.py runs it for about a minute inside the suite; the long form, on a scratch panel:

    sudo .venv/bin/python bench/chaos.py [--minutes 30] [--fault-every 90]
"""

import argparse
import itertools
import json
import os
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import openai
import requests

PROMPTS = ["Write a short letter to a neighbour about their garden.", "Count from 1 to 40, one number a line.",
           "Explain what a lighthouse does.", "List ten fruits and their colours.", "Tell a story about a cat."]


@dataclass
class Answer:
    who: str
    job: int | None = None
    told: str = ""
    ended: str = "open"  # finished, error, hung up, refused
    error: str = ""
    sampled: bool = False


@dataclass
class Fault:
    name: str
    at: float
    recovered_s: float | None = None
    note: str = ""


@dataclass
class Chaos:
    base: str
    token: str
    deployment_id: int
    seconds: float
    faults: list[tuple[str, Callable[[], str]]]
    fault_every: float
    people: int = 4
    max_tokens: int = 48
    batch_lines: int = 12
    answers: list[Answer] = field(default_factory=list)
    happened: list[Fault] = field(default_factory=list)
    batch_id: str = ""

    def __post_init__(self) -> None:
        self.lock = threading.Lock()
        self.until = time.monotonic() + self.seconds
        self.over = threading.Event()  # every fault happened, and `seconds` have passed
        self.client = openai.OpenAI(base_url=f"{self.base}/v1", api_key=self.token, max_retries=0, timeout=300)

    def run(self) -> None:
        self.batch_id = self.start_batch()
        threads = [threading.Thread(target=self.person, args=(n,), daemon=True) for n in range(self.people)]
        threads += [threading.Thread(target=self.script, daemon=True), threading.Thread(target=self.faulting)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def model(self) -> str:
        return f"deployment-{self.deployment_id}"

    def keep(self, answer: Answer) -> None:
        with self.lock:
            self.answers.append(answer)

    def person(self, n: int) -> None:
        turn = 0
        while not self.over.is_set():
            turn += 1
            sampled, hang_up = turn % 2 == 0, turn % 3 == 0
            answer = Answer(f"person {n}", sampled=sampled)
            params = {"temperature": 0.8} if sampled else {"temperature": 0}
            try:
                stream = self.client.chat.completions.create(
                    model=self.model(), messages=[{"role": "user", "content": random.choice(PROMPTS)}],
                    max_tokens=self.max_tokens, stream=True, **params)
                chunks = 0
                for chunk in stream:
                    answer.job = answer.job or int(chunk.id.removeprefix("chatcmpl-"))
                    if chunk.choices and chunk.choices[0].delta.content:
                        answer.told += chunk.choices[0].delta.content
                        chunks += 1
                    if hang_up and chunks >= 5:
                        stream.close()
                        answer.ended = "hung up"
                        break
                else:
                    answer.ended = "finished"
            except openai.APIStatusError as exc:
                answer.ended, answer.error = "refused", f"{exc.status_code}: {message_of(exc)}"
            except openai.APIError as exc:  # an error chunk in the stream, or the connection cut
                answer.ended, answer.error = "error", message_of(exc)
            self.keep(answer)

    def script(self) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        while not self.over.is_set():
            answer = Answer("script")
            try:
                made = requests.post(f"{self.base}/api/jobs/", headers=headers, timeout=60, json={
                    "kind": "completion", "prompt": "The three primary colours are", "deployment": self.deployment_id,
                    "params": {"max_tokens": self.max_tokens // 2, "temperature": 0}})
                if made.status_code != 201:
                    answer.ended, answer.error = "refused", f"{made.status_code}: {made.text[:200]}"
                    time.sleep(1)  # as a script would before trying again
                else:
                    answer.job = made.json()["id"]
                    answer.ended, answer.told, answer.error = self.poll(answer.job, headers)
            except requests.RequestException as exc:
                answer.ended, answer.error = "refused", str(exc)
                time.sleep(1)
            self.keep(answer)

    def poll(self, job_id: int, headers: dict) -> tuple[str, str, str]:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            try:
                job = requests.get(f"{self.base}/api/jobs/{job_id}/", headers=headers, timeout=30)
            except requests.RequestException:
                time.sleep(1)
                continue
            body = job.json() if job.status_code == 200 else {}
            if body.get("status") in ("succeeded", "failed", "cancelled"):
                ended = "finished" if body["status"] == "succeeded" else "error"
                return ended, body.get("output") or "", body.get("error") or ""
            time.sleep(0.5)
        return "open", "", "no end within 600 s"

    def start_batch(self) -> str:
        lines = "".join(json.dumps({"custom_id": f"line-{n}", "method": "POST", "url": "/v1/chat/completions",
                                    "body": {"model": self.model(), "max_tokens": self.max_tokens // 2,
                                             "messages": [{"role": "user", "content": f"Say the number {n}."}]}})
                        + "\n" for n in range(1, self.batch_lines + 1))
        uploaded = self.client.files.create(file=("chaos.jsonl", lines.encode()), purpose="batch")
        return self.client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions",
                                          completion_window="24h").id

    def faulting(self) -> None:
        """One fault every `fault_every` seconds once the last has recovered, each of them at least once, for
        `seconds` at least; then a last quiet spell of `fault_every` seconds under the same load."""
        try:
            turn = 0
            while turn < len(self.faults) or time.monotonic() + self.fault_every < self.until:
                time.sleep(self.fault_every)
                name, fault = self.faults[turn % len(self.faults)]
                turn += 1
                happened = Fault(name, time.monotonic())
                try:
                    happened.note = fault() or ""
                except Exception as exc:  # the soak goes on; the verdict names the fault that could not land
                    happened.note = f"could not: {type(exc).__name__}: {exc}"
                happened.recovered_s = ready_again(self.deployment_id, happened.at, within=300)
                self.happened.append(happened)
            time.sleep(self.fault_every)
        finally:
            self.over.set()

    def batch_lines_seen(self, within: float = 600) -> Counter:
        """How many times each custom_id came back, in the output and error files, once the batch ended."""
        deadline = time.monotonic() + within
        batch = self.client.batches.retrieve(self.batch_id)
        while batch.status not in ("completed", "failed", "cancelled", "expired") and time.monotonic() < deadline:
            time.sleep(1)
            batch = self.client.batches.retrieve(self.batch_id)
        seen = Counter()
        for file_id in (batch.output_file_id, batch.error_file_id):
            if file_id:
                for line in self.client.files.content(file_id).text.splitlines():
                    seen[json.loads(line)["custom_id"]] += 1
        return seen

    def verdict(self) -> dict:
        """What happened, and every broken promise in `problems`."""
        problems, counts = [], Counter(f"{a.who.split()[0]} {a.ended}" for a in self.answers)
        for answer in self.answers:
            if answer.job is None:
                if answer.ended != "refused":
                    problems.append(f"{answer.who}: no job and {answer.ended}: {answer.error}")
                continue
            last = final_job(answer.job)
            kept = last.output or ""
            if answer.ended == "finished" and answer.told != kept or not kept.startswith(answer.told):
                problems.append(f"job {answer.job} ({answer.ended}): spliced: told {answer.told!r}, the job that "
                                f"answered (#{last.pk}) kept {kept!r}")
            if answer.ended == "error" and (not answer.error.strip() or "Traceback" in answer.error):
                problems.append(f"job {answer.job}: a failure not named in words: {answer.error!r}")
        seen = self.batch_lines_seen()
        lines = {f"line-{n}" for n in range(1, self.batch_lines + 1)}
        if set(seen) != lines or any(count != 1 for count in seen.values()):
            problems.append(f"batch lines not each exactly once: {dict(seen)}")
        errors = Counter(a.error.split(";")[0][:90] for a in self.answers if a.ended in ("error", "refused"))
        problems += [f"{f.name}: {f.note}" for f in self.happened if f.note.startswith("could not")]
        return {"answers": dict(counts), "failures": dict(errors), "batch_lines": sum(seen.values()),
                "faults": [(f.name, round(f.recovered_s, 1) if f.recovered_s is not None else None, f.note)
                           for f in self.happened],
                "problems": problems, "sampled_streams": sum(a.sampled for a in self.answers)}


def message_of(exc: openai.APIError) -> str:
    body = exc.body if isinstance(exc.body, dict) else {}
    return str(body.get("message") or (body.get("error") or {}).get("message") or exc.message or exc)


def final_job(job_id: int):
    """The job that answered in the end: a job a laptop's death failed is answered by its retry, a new job."""
    from jobs.models import Job

    job = Job.objects.get(pk=job_id)
    while (retry := Job.objects.filter(retry_of=job).first()) is not None:
        job = retry
    return job


def ready_again(deployment_id: int, since: float, within: float) -> float | None:
    """Seconds from `since` until the deployment is ready with its engine loaded again, once it has been seen
    otherwise (up to 10 s for the fault to show: a dead laptop is seen by the engine or the supervisor); 0 if it
    never was; None if not ready within `within`."""
    from models_app.models import Deployment, DeploymentStatus

    def ready() -> bool:
        deployment = Deployment.objects.get(pk=deployment_id)
        return deployment.status == DeploymentStatus.READY and (deployment.engine or {}).get("state") == "ready"

    shown = time.monotonic() + 10
    while ready():
        if time.monotonic() > shown:
            return 0.0
        time.sleep(0.1)
    deadline = since + within
    while time.monotonic() < deadline:
        if ready():
            return time.monotonic() - since
        time.sleep(0.2)
    return None


# The faults, each given a deployment; each returns a note in words.

def victim(deployment_id: int, turn: int):
    """The stage a laptop fault hits this time: each of the deployment's laptops in turn, never the head's own
    process (position 0 when the head holds layers is still a laptop's rpc-server). Taking turns keeps a laptop's
    second death from coming within recovery's KEEP_AGAIN_AFTER_S (jobs/engine/comeback.py), after which it
    would be re-planned out, as an out-of-memory laptop must be, and the soak would run on fewer laptops."""
    from models_app.models import Deployment

    stages = list(Deployment.objects.get(pk=deployment_id).stages.select_related("node", "server")
                  .filter(server__isnull=False).order_by("position"))
    return stages[turn % len(stages)]


def kill_rpc_server(deployment_id: int, turn: int = 1) -> str:
    from nodes.remote import ssh

    stage = victim(deployment_id, turn)
    ssh.run(stage.node.ssh_target(), ["kill", "-9", str(stage.server.pid)])
    return f"{stage.node.name}'s rpc-server killed"


def freeze_laptop(deployment_id: int, seconds: float, turn: int = 2) -> str:
    from nodes.remote import ssh

    stage = victim(deployment_id, turn)
    ssh.run(stage.node.ssh_target(), ["kill", "-STOP", str(stage.server.pid)])
    time.sleep(seconds)
    ssh.run(stage.node.ssh_target(), ["kill", "-CONT", str(stage.server.pid)])
    return f"{stage.node.name}'s rpc-server frozen for {seconds:g} s"


def kill_engine_worker(deployment_id: int) -> str:
    from models_app.models import Deployment

    worker = (Deployment.objects.get(pk=deployment_id).engine or {}).get("worker")
    if not worker:
        return "no engine worker to kill"
    os.killpg(worker, signal.SIGKILL)
    return f"engine worker group {worker} killed"


def standard_faults(deployment_id: int, restart_redis: Callable[[], None], freeze_s: float) -> list:
    def redis() -> str:
        restart_redis()
        return "Redis killed and started again"

    kills, freezes = itertools.count(1), itertools.count(2)
    return [("rpc-server killed", lambda: kill_rpc_server(deployment_id, next(kills))),
            ("laptop frozen", lambda: freeze_laptop(deployment_id, freeze_s, next(freezes))),
            ("Redis restarted", redis),
            ("engine worker killed", lambda: kill_engine_worker(deployment_id))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--fault-every", type=float, default=90)
    parser.add_argument("--people", type=int, default=4)
    args = parser.parse_args()
    from scratch_panel import scratch_panel

    with scratch_panel(laptops=3, name="chaos", subnet="10.236.0.0/24",
                       worker_pool=("--pool", "prefork", "--concurrency", "4")) as panel:
        from clusterpanel.accounts.models import ApiToken, User
        from models_app.library.adding import ensure_bundled

        deployment = panel.deploy(ensure_bundled(), ctx=2048, slots=4)
        token = ApiToken.issue(User.objects.get(username="bench"), "chaos")[1]
        web = panel.pids["web"]
        rss_before = rss_mib(web)
        chaos = Chaos(panel.base, token, deployment.pk, args.minutes * 60,
                      standard_faults(deployment.pk, lambda: panel.restart_redis(5), 20), args.fault_every,
                      people=args.people, max_tokens=160, batch_lines=40)
        chaos.run()
        result = chaos.verdict()
        result["web_rss_mib"] = (rss_before, rss_mib(web))
        result["alive"] = panel.alive()
    print(report(result, args))


def report(result: dict, args) -> str:
    """The soak's figures as Markdown tables, for docs/benchmarks.md."""
    rows = [f"chaos soak: {args.minutes:g} min, a fault every {args.fault_every:g} s, {args.people} people", "",
            "| answers | count |", "|---|--:|"]
    rows += [f"| {kind} | {count} |" for kind, count in sorted(result["answers"].items())]
    rows += ["", "| failure, as its client was told | count |", "|---|--:|"]
    rows += [f"| {text} | {count} |" for text, count in sorted(result["failures"].items(), key=lambda i: -i[1])]
    rows += ["", "| fault | ready again after (s) | what |", "|---|--:|---|"]
    rows += [f"| {name} | {'never left ready' if s == 0 else s} | {note} |" for name, s, note in result["faults"]]
    before, after = result["web_rss_mib"]
    rows += ["", f"batch lines back: {result['batch_lines']}; web server RSS {before} → {after} MiB; "
             f"processes alive: {result['alive']}; problems: {result['problems'] or 'none'}"]
    return "\n".join(rows)


def rss_mib(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


if __name__ == "__main__":
    main()
