"""Preparing a deployment happens once: prepared again (a task delivered twice), one after the other or both at
the same time, every laptop still runs one rpc-server and every stage has one server."""

import threading
import time

import pytest
from django.db import connection

from models_app.deploying import deploy
from models_app.library.adding import ensure_bundled
from models_app.models import Deployment, DeploymentStatus
from models_app.tasks import prepare_deployment
from nodes.models import ActionKind, RpcServer, ServerStatus
from nodes.remote import ssh
from tests.conftest import wait_until
from tests.nodes.laptops import register_all


@pytest.fixture
def laptops(lan, transactional_db):
    return register_all(lan(3), then=ActionKind.PROBE)


@pytest.fixture
def deployment(laptops, supervisor):
    made = deploy.create(ensure_bundled(), laptops, 512, mode="even", preseed=False)
    yield made
    deploy.stop(made)
    wait_until(lambda: not RpcServer.objects.exclude(status=ServerStatus.STOPPED).exists(), 30,
               "every rpc-server stopped")


def rpc_servers_on(node) -> int:
    """ggml-rpc-server processes of the laptop's user, counted on the laptop itself."""
    counted = ssh.run(node.ssh_target(), ["sh", "-c", 'pgrep -c -x -u "$(id -u)" ggml-rpc-server || true'])
    return int(counted.stdout.strip())


def in_a_thread(deployment_pk: int) -> threading.Thread:
    def prepare():
        try:
            prepare_deployment(deployment_pk)
        finally:
            connection.close()  # this thread's own database connection

    thread = threading.Thread(target=prepare)
    thread.start()
    return thread


def assert_one_server_per_laptop(deployment: Deployment, laptops) -> None:
    deployment.refresh_from_db()
    assert deployment.status == DeploymentStatus.READY, deployment.status_detail
    time.sleep(2)  # a few supervisor rounds: a server row too many would be started by now
    for node in laptops:
        assert rpc_servers_on(node) == 1, node.name
        assert RpcServer.objects.filter(node=node, wanted=True).count() == 1, node.name
    assert all(stage.server_id for stage in deployment.stages.all())


def test_it_prepares_once_when_asked_twice_in_a_row(deployment, laptops):
    prepare_deployment(deployment.pk)
    prepare_deployment(deployment.pk)  # the same task delivered again
    for stage in deployment.stages.all():
        server = stage.server_id
        deploy.start_server(stage)  # a step run again keeps the server the stage has
        assert stage.server_id == server
    assert_one_server_per_laptop(deployment, laptops)


def test_it_prepares_once_when_asked_twice_at_the_same_time(deployment, laptops):
    threads = [in_a_thread(deployment.pk), in_a_thread(deployment.pk)]
    for thread in threads:
        thread.join(600)
    assert_one_server_per_laptop(deployment, laptops)
