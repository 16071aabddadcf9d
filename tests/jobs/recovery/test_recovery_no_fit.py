"""A laptop dies and the model no longer fits on the laptops left: the job and the deployment say so, with
the planner's numbers; nothing is retried and the deployment stops, giving its laptops' memory back. (Its
rpc-server cannot come back: its runtime is gone, so the supervisor cannot restart it, and the re-plan must do
without it.)"""

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from jobs.models import Job, JobStatus
from jobs.queue import queueing
from models_app.deploying import deploy
from models_app.library.adding import ensure_bundled
from models_app.models import Deployment, DeploymentStatus
from nodes.models import ActionKind, Node
from nodes.remote import ssh
from tests.conftest import wait_until
from tests.jobs.cluster import chat, end_engines, engine_ready
from tests.nodes.laptops import register_all

MiB = 2**20


@pytest.fixture
def tight_cluster(lan, transactional_db, supervisor, bob):
    laptops = register_all(lan(3), then=ActionKind.PROBE)
    for node in laptops:
        node.usable_memory = 100 * MiB  # three hold the model at ctx 1024 (about 265 MiB), two do not
        node.save()
    deployment = deploy.create(ensure_bundled(), laptops, 1024, mode="fastest")
    deploy.prepare(deployment)
    deployment.refresh_from_db()
    assert deployment.status == DeploymentStatus.READY and deployment.stages.count() == 3, deployment.status_detail
    engine_ready(deployment)
    yield deployment
    supervisor.terminate()
    supervisor.wait(30)
    end_engines()


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


def test_when_the_model_no_longer_fits_the_job_and_deployment_say_why(tight_cluster, bob, celery_worker):
    job = chat(tight_cluster, bob, "Write a long story about a laptop.", max_tokens=2000)
    wait_until(lambda: len(queueing.stream.kept(job.pk)) > 5, 60, "generation under way")
    victim = tight_cluster.stages.select_related("node", "server").get(position=0)
    with runtime_away(victim.node):
        ssh.run(victim.node.ssh_target(), ["kill", "-9", str(victim.server.pid)])
        wait_until(lambda: "Not retried" in Job.objects.get(pk=job.pk).error, 120, "the job to say it was not retried")
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and victim.node.name in job.error
    assert "no longer fits" in job.error and "GiB" in job.error
    deployment = Deployment.objects.get(pk=tight_cluster.pk)
    assert deployment.status == DeploymentStatus.FAILED and "no longer fits" in deployment.status_detail
    assert not Job.objects.filter(retry_of=job).exists()
