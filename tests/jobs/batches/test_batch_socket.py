"""A batch page's socket: the current counts as soon as it opens (a late page is right at once), new counts
whenever an item starts or ends, and nothing for someone else's batch."""

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.testing import WebsocketCommunicator

from clusterpanel.accounts.models import Role, User
from clusterpanel.asgi import application
from clusterpanel.kit.broadcast import broadcast
from jobs.batches import service as batches
from jobs.models import JobStatus
from tests.conftest import PASSWORD
from tests.jobs.standins import ready_deployment
from tests.nodes.test_live_updates import headers_for


@pytest.fixture
def batch(transactional_db, bob):
    return batches.from_file(bob, ready_deployment(), "three.csv", b"prompt\nOne\nTwo\n\nThree\n")


def test_it_sends_the_counts_on_connect_and_after_each_change(batch, bob):
    headers = headers_for(bob)

    async def scenario():
        comm = WebsocketCommunicator(application, f"/ws/batches/{batch.pk}/", headers=headers)
        assert (await comm.connect(timeout=30))[0]
        first = await comm.receive_json_from(timeout=10)
        job = await batch.items.afirst()
        await batch.items.filter(pk=job.pk).aupdate(status=JobStatus.SUCCEEDED)
        await sync_to_async(broadcast)(batches.group(batch.pk), "batch.progress", {"job": job.pk})
        second = await comm.receive_json_from(timeout=10)
        await comm.disconnect()
        return first, second

    first, second = async_to_sync(scenario)()
    assert first["type"] == "counts" and (first["queued"], first["succeeded"], first["total"]) == (3, 0, 3)
    assert (second["queued"], second["succeeded"], second["done"]) == (2, 1, 1)


def test_someone_elses_batch_is_refused(batch):
    charlie = User.objects.create_user("charlie", "c@example.org", PASSWORD, role=Role.USER)
    headers = headers_for(charlie)

    async def scenario():
        comm = WebsocketCommunicator(application, f"/ws/batches/{batch.pk}/", headers=headers)
        connected, code = await comm.connect(timeout=30)
        # Ended here, not by asyncio.run's clean-up, which once hung for ten minutes cancelling the consumer's
        # read of the channel layer (a parallel run, tests/jobs/batches/test_batch_socket.py).
        await comm.disconnect()
        return connected, code

    assert async_to_sync(scenario)() == (False, 4403)
