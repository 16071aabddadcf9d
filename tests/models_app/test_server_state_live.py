"""The deployment page hears each of its rpc-servers change state as the supervisor records it, so it never
says "Ready" beside a server that failed until someone reloads; a server of no deployment tells nobody."""

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.testing import WebsocketCommunicator

from clusterpanel.asgi import application
from models_app.models import DeploymentStage
from nodes.models import Node, RpcServer, ServerStatus
from nodes.servers.supervisor import Supervisor
from tests.jobs.standins import ready_deployment
from tests.nodes.test_live_updates import headers_for

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJRvvesEHT9Lj/odiUekLSyxfHkxh+kIRGnuGyJVpB1/"


@pytest.mark.django_db(transaction=True)
def test_a_failed_server_shows_on_its_deployments_page(alice):
    node = Node.objects.create(name="lab-1", host="192.0.2.1", username="lab", host_key=KEY)
    server = RpcServer.objects.create(node=node, port=50052, wanted=True, status=ServerStatus.RUNNING)
    loose = RpcServer.objects.create(node=node, port=50053, wanted=True, status=ServerStatus.RUNNING)
    deployment = ready_deployment()
    DeploymentStage.objects.create(deployment=deployment, position=1, node=node, first_layer=0, layer_count=5,
                                   memory={}, server=server)
    headers = headers_for(alice)

    async def scenario():
        comm = WebsocketCommunicator(application, f"/ws/deployments/{deployment.pk}/", headers=headers)
        connected, _ = await comm.connect(timeout=30)
        assert connected
        assert (await comm.receive_json_from(timeout=5))["type"] == "status"  # catching up
        await sync_to_async(Supervisor.update)(loose, status=ServerStatus.FAILED)  # not this deployment's
        await sync_to_async(Supervisor.update)(server, failures=1)  # no change of state: nothing to say
        await sync_to_async(Supervisor.update)(server, status=ServerStatus.FAILED, last_death="killed")
        heard = await comm.receive_json_from(timeout=5)
        nothing_more = await comm.receive_nothing(timeout=0.5)
        await comm.disconnect()
        return heard, nothing_more

    heard, nothing_more = async_to_sync(scenario)()
    assert heard == {"type": "server", "position": 1, "port": 50052, "status": "failed", "label": "Failed",
                     "node": "lab-1", "why": "killed"}
    assert nothing_more
