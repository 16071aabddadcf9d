"""Two replicas of the bundled model (one simulated laptop each, 4 slots each) under 16 streaming clients of the
real `openai` client, all naming the model: both replicas serve; then one replica's rpc-server is killed while
it is answering and has requests waiting. Every request still completes: its waiting jobs move to the other
replica (the move written in each job), its interrupted answers are retried there at once, and each client's
stream follows its retry from where its text had got to, so it reads one whole answer with nothing twice."""

import threading

import openai
import pytest

from clusterpanel.accounts.models import ApiToken
from jobs.models import STOPPED, Job, JobStatus
from jobs.queue import sharing, stream
from models_app.models import Deployment
from nodes.models import ActionKind
from nodes.remote import ssh
from tests.conftest import wait_until
from tests.jobs.cluster import deploy_bundled, end_engines, engine_ready
from tests.nodes.laptops import register_all

CLIENTS = 16
SLOTS = 4
MAX_TOKENS = 40


def tokens_out(job_id: int) -> int:
    return sum(event["event"] == "token" for event in stream.kept(job_id))


class Client(threading.Thread):
    """One person streaming one answer; what it read, and how it ended."""

    def __init__(self, api: openai.OpenAI, model: str, n: int) -> None:
        super().__init__(daemon=True)
        self.api, self.model, self.n = api, model, n
        self.text, self.job_id, self.finish, self.error = "", None, None, None

    def run(self) -> None:
        try:
            chunks = self.api.chat.completions.create(
                model=self.model, stream=True, max_tokens=MAX_TOKENS, temperature=0, seed=1,
                messages=[{"role": "user", "content": f"Count from {self.n * 100} to {self.n * 100 + 80}, "
                                                      "one number a line."}])
            for chunk in chunks:
                self.job_id = int(chunk.id.removeprefix("chatcmpl-"))
                if chunk.choices and chunk.choices[0].delta.content:
                    self.text += chunk.choices[0].delta.content
                if chunk.choices and chunk.choices[0].finish_reason:
                    self.finish = chunk.choices[0].finish_reason
        except Exception as exc:  # the test says which client failed, and how
            self.error = f"{type(exc).__name__}: {exc}"


@pytest.fixture
def two_replicas(lan, transactional_db, supervisor, bob):
    laptops = register_all(lan(3), then=ActionKind.PROBE)
    replicas = [deploy_bundled([laptop], slots=SLOTS) for laptop in laptops[:2]]
    for deployment in replicas:
        engine_ready(deployment)
    yield replicas
    supervisor.terminate()
    supervisor.wait(30)
    end_engines()


def busy_with_waiting(replicas: list[Deployment]) -> Deployment | None:
    """A replica answering (each answer a few tokens in, none near its end) with requests waiting behind."""
    for deployment in replicas:
        running = Job.objects.filter(deployment=deployment, status=JobStatus.RUNNING).values_list("pk", flat=True)
        waiting = Job.objects.filter(deployment=deployment, status=JobStatus.QUEUED).exists()
        if waiting and running and all(3 <= tokens_out(pk) <= MAX_TOKENS - 12 for pk in running):
            return deployment
    return None


def test_a_replica_killed_mid_answer_hands_everything_to_the_other_and_no_request_is_lost(two_replicas, web_server,
                                                                                        bob):
    model = two_replicas[0].model.name
    api = openai.OpenAI(base_url=f"{web_server}/v1", api_key=ApiToken.issue(bob, "replicas")[1], max_retries=0,
                        timeout=120)
    clients = [Client(api, model, n) for n in range(CLIENTS)]
    for client in clients:
        client.start()
    wait_until(lambda: Job.objects.count() == CLIENTS, 30, "every request queued")
    served = set(Job.objects.values_list("deployment", flat=True))
    assert served == {deployment.pk for deployment in two_replicas}, "both replicas got requests"

    found = []
    wait_until(lambda: found.append(busy_with_waiting(two_replicas)) or found[-1], 60,
               "a replica answering with requests waiting")
    victim = found[-1]
    other = next(deployment for deployment in two_replicas if deployment != victim)
    stage = victim.stages.select_related("node", "server").get()
    ssh.run(stage.node.ssh_target(), ["kill", "-9", str(stage.server.pid)])
    interrupted = set(Job.objects.filter(deployment=victim, status=JobStatus.RUNNING).values_list("pk", flat=True))
    waiting = set(Job.objects.filter(deployment=victim, status=JobStatus.QUEUED).values_list("pk", flat=True))

    for client in clients:
        client.join(150)
    assert [(c.n, c.error) for c in clients if c.error or c.is_alive()] == [], "every client read to the end"
    assert all(c.finish in ("stop", "length") and c.text.strip() for c in clients), \
        [(c.n, c.finish, c.text[:40]) for c in clients]

    for job in Job.objects.filter(pk__in=waiting - interrupted):
        assert job.status == JobStatus.SUCCEEDED, (job.pk, job.status, job.error)
        first, *later = job.params["routing"]["moves"]
        assert (first["from"], first["to"]) == (victim.pk, other.pk), first
        # Back on the victim only as a share of what waited, once its engine was up again (jobs/queue/sharing.py).
        assert all(line["why"] == sharing.WHY for line in later), later
        assert job.deployment == other or later, job.deployment
    for job in Job.objects.filter(pk__in=interrupted).select_related("retry"):
        assert job.status == JobStatus.FAILED and job.error.startswith(STOPPED), (job.pk, job.status, job.error)
        moves = [line["why"] for line in (job.retry.params.get("routing") or {}).get("moves", [])]
        assert job.retry.status == JobStatus.SUCCEEDED, job.retry.error
        assert job.retry.deployment == other or sharing.WHY in moves, (job.retry.deployment, moves)
    assert interrupted and waiting - interrupted, "the kill found answers running and requests waiting"
    by_job = {client.job_id: client for client in clients}
    assert len(by_job) == CLIENTS
    for pk, client in by_job.items():
        job = Job.objects.select_related("retry").get(pk=pk)
        answered = job.retry if pk in interrupted else job
        assert client.text == answered.output, f"client {client.n} read its answer once, whole: {client.text!r}"
