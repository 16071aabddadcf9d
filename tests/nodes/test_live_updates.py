"""Node pages hear about actions as workers report them, through the channel layer."""

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from clusterpanel.asgi import application
from nodes.models import ActionKind, Node, NodeAction


def headers_for(user=None) -> list[tuple[bytes, bytes]]:
    """A browser's headers, with the session cookie of `user` when given."""
    headers = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]
    if user is not None:
        client = Client()
        client.force_login(user)
        headers.append((b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()))
    return headers


@pytest.fixture
def node(db):
    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJRvvesEHT9Lj/odiUekLSyxfHkxh+kIRGnuGyJVpB1/"
    return Node.objects.create(name="n1", host="10.232.0.99", username="u", host_key=key)


@pytest.mark.django_db(transaction=True)
def test_it_streams_an_actions_progress_to_an_admins_page(alice, node):
    headers = headers_for(alice)

    async def scenario():
        comm = WebsocketCommunicator(application, f"/ws/nodes/{node.pk}/", headers=headers)
        connected, _ = await comm.connect(timeout=30)
        assert connected
        action = await sync_to_async(NodeAction.objects.create)(node=node, kind=ActionKind.INSTALL_RUNTIME)
        await sync_to_async(action.report)("Copying", bytes_done=10, bytes_total=100, mb_per_s=1.5, eta_s=60)
        message = await comm.receive_json_from(timeout=5)
        await comm.disconnect()
        return action.pk, message

    action_id, message = async_to_sync(scenario)()
    assert message["type"] == "action" and message["id"] == action_id
    assert message["progress"]["bytes_done"] == 10 and message["message"] == "Copying"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("who", [None, "bob"])
def test_it_turns_away_anyone_but_a_lab_admin(who, bob, node):
    headers = headers_for(bob if who else None)

    async def scenario():
        comm = WebsocketCommunicator(application, f"/ws/nodes/{node.pk}/", headers=headers)
        connected, code = await comm.connect(timeout=30)
        await comm.disconnect()
        return connected, code

    connected, code = async_to_sync(scenario)()
    assert not connected
    assert code == 4403
