"""A laptop whose rpc-server is killed mid-answer and restarted by the supervisor before the re-plan keeps its
place: the job fails naming it, the deployment comes back on all three laptops in the same order, and the retry
answers what the deployment answered before the kill, token for token."""

from jobs.models import Job, JobStatus
from jobs.queue import stream
from models_app.models import DeploymentStatus
from nodes import ssh
from nodes.models import RpcServer
from tests.conftest import wait_until
from tests.jobs.cluster import chat

PROMPT = "Write a long story about a laptop."  # runs past TOKENS: the kill lands mid-answer
TOKENS = 240


def tokens_out(job_id: int) -> int:
    return sum(event["event"] == "token" for event in stream.kept(job_id))


def finished(job: Job, within: float) -> Job:
    return wait_until(lambda: (found := Job.objects.get(pk=job.pk)).is_finished and found, within,
                      f"job {job.pk} to finish")


def test_it_keeps_the_laptop_whose_rpc_server_is_back_and_the_retry_answers_as_before(cluster, bob, celery_worker):
    before = finished(chat(cluster, bob, PROMPT, max_tokens=TOKENS), 180)
    assert before.status == JobStatus.SUCCEEDED and before.completion_tokens == TOKENS, before.error
    laptops = [stage.node.name for stage in cluster.stages.select_related("node").order_by("position")]
    job = chat(cluster, bob, PROMPT, max_tokens=TOKENS)
    wait_until(lambda: tokens_out(job.pk) >= 5, 60, "generation under way")
    victim = cluster.stages.select_related("node", "server").get(position=1)
    ssh.run(victim.node.ssh_target(), ["kill", "-9", str(victim.server.pid)])

    job = finished(job, 90)
    assert job.status == JobStatus.FAILED and tokens_out(job.pk) < TOKENS, "the kill landed mid-answer"
    assert victim.node.name in job.error and "killed (signal 9)" in job.error, job.error
    retry = wait_until(lambda: Job.objects.filter(retry_of=job).first(), 120, "the retry")
    retry = finished(retry, 240)
    assert retry.status == JobStatus.SUCCEEDED, retry.error
    assert retry.output == before.output, "the recovered deployment answers as before, token for token"

    cluster.refresh_from_db()
    assert cluster.status == DeploymentStatus.READY and cluster.revision == 2, cluster.status_detail
    assert [stage.node.name for stage in cluster.stages.select_related("node").order_by("position")] == laptops
    assert f"{victim.node.name} kept its place: its rpc-server is running again" in cluster.status_detail
    server = RpcServer.objects.get(pk=victim.server_id)
    assert server.wanted and server.pid != victim.server.pid, "the laptop serves through its restarted server"
    assert cluster.stages.get(position=1).server_id == victim.server_id
