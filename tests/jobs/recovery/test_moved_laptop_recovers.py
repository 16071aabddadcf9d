"""A deployment whose laptop comes back at another address (a new DHCP lease, nodes/simlan/dhcp.py) recovers as after
a laptop that drops: the scan moves the laptop, the supervisor restarts its rpc-server and tunnel at the new
address, recovery keeps the plan (the laptop is back) and a new engine answers with the same greedy text as
before the move, the laptop in the same place of the pipeline.

The supervisor's round at the old address hangs until its command gives up, and recovery waits that long before
it looks for the laptop (jobs/engine/moves.py): LAPTOP_QUICK_COMMAND_S is 8 s here rather than 15 s."""

import pytest

from jobs.models import Job, JobStatus
from models_app.models import Deployment, DeploymentStatus
from nodes.laptops import refind
from nodes.models import ActionKind, LanScan, RpcServer
from nodes.remote import ssh
from nodes.simlan import dhcp as simdhcp
from tests.conftest import wait_until
from tests.jobs.cluster import chat, deploy_bundled, end_engines, engine_ready
from tests.nodes.laptops import register_all
from tests.services import lan_harness

QUESTION = "Name three colours."
QUICK_S = 8  # a command here answers in under a second; a start may take 6 s (settings.LAPTOP_QUICK_COMMAND_S)


@pytest.fixture(autouse=True)
def quick_commands(monkeypatch, settings) -> None:
    """Quick commands give up after QUICK_S in this process and in the supervisor and worker (started after)."""
    monkeypatch.setenv("LAPTOP_QUICK_COMMAND_S", str(QUICK_S))
    settings.LAPTOP_QUICK_COMMAND_S = QUICK_S


@pytest.fixture(scope="module")
def dhcp():
    harness = lan_harness("moved", "10.219.0.0/24")
    harness.up(2)
    yield harness
    harness.down()


def answer(deployment: Deployment, user) -> str:
    job = chat(deployment, user, QUESTION, max_tokens=12)
    wait_until(lambda: Job.objects.get(pk=job.pk).status in (JobStatus.SUCCEEDED, JobStatus.FAILED), 120,
               "the answer")
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, job.error
    return job.output


def test_a_deployment_follows_its_laptop_to_a_new_address(dhcp, transactional_db, supervisor, celery_worker, bob):
    try:
        nodes = register_all(dhcp.status(), then=ActionKind.PROBE)
        deployment = deploy_bundled(nodes)
        engine_ready(deployment)
        before, revision = answer(deployment, bob), deployment.revision
        places = dict(deployment.stages.values_list("node__name", "position"))
        new = str(dhcp.network[60])
        old = simdhcp.move(dhcp, 2, new)
        # 64 addresses: one round of refind.AT_ONCE connections, an empty address's timeout once
        scan = LanScan.objects.create(addresses=f"{dhcp.network[1]}-{dhcp.network[64]}")
        refind.run(scan.pk)
        scan.refresh_from_db()
        assert scan.summary.startswith(f"Found {nodes[1].name} at {new} (was {old}); {deployment} recovers"), \
            scan.summary

        def back() -> bool:
            now = Deployment.objects.get(pk=deployment.pk)
            ended = now.status == DeploymentStatus.FAILED
            return ended or now.status == DeploymentStatus.READY and now.revision > revision

        wait_until(back, 180, "the deployment back after the move")
        deployment.refresh_from_db()
        assert deployment.status == DeploymentStatus.READY, deployment.status_detail
        engine_ready(deployment)
        assert dict(deployment.stages.values_list("node__name", "position")) == places, "the same plan"
        server = RpcServer.objects.get(node=nodes[1])
        assert server.node.host == new and not server.restart_requested
        assert answer(deployment, bob) == before
        for node in nodes:
            ssh.forget(node.ssh_target())
            node.refresh_from_db()
            ssh.forget(node.ssh_target())
    finally:
        supervisor.terminate()
        supervisor.wait(30)
        end_engines()
