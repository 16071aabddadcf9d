"""A laptop whose rpc-server is killed mid-answer and restarted by the supervisor by the time recovery decides
keeps its place. When every such laptop is back, nothing is re-planned: the job fails naming the laptop, the
engine worker whose child died reloads the same plan, and the retry answers what the deployment answered before
the kill, token for token. When one is back and another is not, the re-plan keeps the one that is back."""

from collections.abc import Iterator
from contextlib import contextmanager

from jobs.models import Job, JobStatus
from jobs.queue import stream
from models_app.models import Deployment, DeploymentStatus
from nodes.models import Node, RpcServer
from nodes.remote import ssh
from tests.conftest import wait_until
from tests.jobs.cluster import chat

PROMPT = "Write a long story about a laptop."  # runs past TOKENS: the kill lands mid-answer
# The kill lands a few tokens in (an SSH round trip after the fifth), well before the last; each answer (before,
# and each retry) is TOKENS long, and the retries are compared token for token. 240 cost twice the time.
TOKENS = 120


def tokens_out(job_id: int) -> int:
    return sum(event["event"] == "token" for event in stream.kept(job_id))


def finished(job: Job, within: float) -> Job:
    return wait_until(lambda: (found := Job.objects.get(pk=job.pk)).is_finished and found, within,
                      f"job {job.pk} to finish")


def laptops(deployment: Deployment) -> list[str]:
    return [stage.node.name for stage in deployment.stages.select_related("node").order_by("position")]


def killed_mid_answer(deployment: Deployment, user, positions: list[int]) -> tuple[Job, list]:
    """A long answer under way, then the rpc-servers of the laptops at `positions` killed; the job and those
    stages (as they were)."""
    job = chat(deployment, user, PROMPT, max_tokens=TOKENS)
    wait_until(lambda: tokens_out(job.pk) >= 5, 60, "generation under way")
    victims = [deployment.stages.select_related("node", "server").get(position=p) for p in positions]
    for victim in victims:
        ssh.run(victim.node.ssh_target(), ["kill", "-9", str(victim.server.pid)])
    return job, victims


def retried(job: Job) -> Job:
    """The job failed mid-answer naming the laptops; its retry, finished."""
    job = finished(job, 90)
    assert job.status == JobStatus.FAILED and tokens_out(job.pk) < TOKENS, "the kill landed mid-answer"
    assert "killed (signal 9)" in job.error, job.error
    retry = wait_until(lambda: Job.objects.filter(retry_of=job).first(), 120, "the retry")
    retry = finished(retry, 240)
    assert retry.status == JobStatus.SUCCEEDED, retry.error
    return retry


def test_when_every_laptop_is_back_the_same_engine_reloads_the_same_plan_and_answers_as_before(
        cluster, bob, celery_worker):
    before = finished(chat(cluster, bob, PROMPT, max_tokens=TOKENS), 180)
    assert before.status == JobStatus.SUCCEEDED and before.completion_tokens == TOKENS, before.error
    order, worker = laptops(cluster), cluster.engine["worker"]
    job, (victim,) = killed_mid_answer(cluster, bob, [1])
    retry = retried(job)
    assert victim.node.name in Job.objects.get(pk=job.pk).error
    assert retry.output == before.output, "the recovered deployment answers as before, token for token"

    cluster.refresh_from_db()
    assert cluster.status == DeploymentStatus.READY and cluster.revision == 1, "no re-plan"
    assert cluster.engine["worker"] == worker and cluster.engine["state"] == "ready", "no new engine worker"
    assert laptops(cluster) == order
    assert f"{victim.node.name} kept its place: its rpc-server is running again" in cluster.status_detail
    server = RpcServer.objects.get(pk=victim.server_id)
    assert server.wanted and server.pid != victim.server.pid, "the laptop serves through its restarted server"
    assert cluster.engine["servers"][victim.node.name] == server.pid, "the engine loaded onto the new server"


@contextmanager
def runtime_away(node: Node) -> Iterator[None]:
    """The laptop's runtime moved aside, so that the supervisor cannot restart its rpc-server; put back after (the
    simulated laptops serve the next tests)."""
    runtime = ssh.remote_path(f"{node.install_dir}/runtime")
    ssh.sh(node.ssh_target(), 'mv -- "$1/current" "$1/away"', runtime)
    try:
        yield
    finally:
        ssh.sh(node.ssh_target(), 'mv -- "$1/away" "$1/current"', runtime)


def test_a_re_plan_keeps_the_laptop_that_is_back_and_leaves_out_the_one_that_is_not(cluster, bob, celery_worker):
    first, second, third = laptops(cluster)
    with runtime_away(cluster.stages.get(position=2).node):
        job, (_, gone) = killed_mid_answer(cluster, bob, [1, 2])
        retried(job)
    error = Job.objects.get(pk=job.pk).error
    assert second in error and third in error, error

    cluster.refresh_from_db()
    assert cluster.status == DeploymentStatus.READY and cluster.revision == 2, cluster.status_detail
    assert laptops(cluster) == [first, second], "re-planned without the laptop that did not come back"
    assert f"{second} kept its place" in cluster.status_detail, cluster.status_detail
    assert not RpcServer.objects.get(pk=gone.server_id).wanted, "the laptop left out is let go"
