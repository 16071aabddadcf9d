"""The model page follows its checksum live: a lab admin's socket gets the progress now (catching up on
connect) and as the worker reports it; a plain user's is turned away."""

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.testing import WebsocketCommunicator

from clusterpanel.asgi import application
from models_app.models import GgufModel, ModelStatus
from models_app.tasks import report
from tests.nodes.test_live_updates import headers_for


@pytest.fixture
def hashing(db) -> GgufModel:
    return GgufModel.objects.create(name="big", path="/nonexistent/big.gguf", size=40 << 30, hash_progress=0.25,
                                    status=ModelStatus.HASHING, architecture="llama", n_layer=2, n_embd=8, n_head=1,
                                    n_head_kv=1, context_length=4096, vocab_size=32, file_type="Q4_1",
                                    layer_bytes=[1, 1])


@pytest.mark.django_db(transaction=True)
def test_an_admin_sees_the_checksum_move_and_end(alice, hashing):
    headers = headers_for(alice)

    async def scenario():
        comm = WebsocketCommunicator(application, f"/ws/models/{hashing.pk}/", headers=headers)
        connected, _ = await comm.connect(timeout=30)
        assert connected
        now = await comm.receive_json_from(timeout=5)
        await sync_to_async(report)(hashing, progress=0.5)
        moved = await comm.receive_json_from(timeout=5)
        await sync_to_async(report)(hashing, sha256="ab" * 32, progress=1.0, status=ModelStatus.READY)
        done = await comm.receive_json_from(timeout=5)
        await comm.disconnect()
        return now, moved, done

    now, moved, done = async_to_sync(scenario)()
    assert (now["status"], now["hash_progress"]) == ("hashing", 0.25)
    assert float(moved["hash_progress"]) == 0.5
    assert done["status"] == "ready" and done["sha256"] == "ab" * 32


@pytest.mark.django_db(transaction=True)
def test_a_plain_user_is_turned_away(bob, hashing):
    headers = headers_for(bob)

    async def scenario():
        comm = WebsocketCommunicator(application, f"/ws/models/{hashing.pk}/", headers=headers)
        connected, code = await comm.connect(timeout=30)
        # Ended here, not by asyncio.run's clean-up, which once hung for ten minutes cancelling the consumer's
        # read of the channel layer (a parallel run, tests/jobs/batches/test_batch_socket.py).
        await comm.disconnect()
        return connected, code

    assert async_to_sync(scenario)() == (False, 4403)
