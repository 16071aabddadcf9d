"""Everything at once and everything failing, compressed (bench/chaos.py; issue 35): four people streaming through
/v1 with the real openai client, some hanging up, a script on /api/jobs/ and a batch, on the bundled model over
three simulated laptops, while an rpc-server is killed mid-answer, a laptop's server frozen, the suite's Redis
restarted and the engine's worker killed, one after another. Nothing may be lost: no answer spliced, every
failure named, every batch line exactly once, every panel process alive (the engine's worker started again),
the deployment ready again, and no rpc-server left once it is stopped.

Shortened to fit: a fault every 8 s after the last recovered, 32 tokens an answer, a 3 s freeze and a 2 s Redis
outage, the streams' keep-alive every second (STREAM_KEEPALIVE_S) so that their waits go past it."""

import pytest
import requests

from bench.chaos import Chaos, standard_faults
from clusterpanel.accounts.models import ApiToken
from models_app.deploying import deploy
from models_app.models import Deployment, DeploymentStatus
from nodes.models import RpcServer, ServerStatus
from tests.conftest import wait_until
from tests.services import restart_redis

pytestmark = pytest.mark.timeout(900)


@pytest.fixture
def cluster_slots() -> int:
    return 2


@pytest.fixture
def web_env() -> dict[str, str]:
    return {"STREAM_KEEPALIVE_S": "1"}


@pytest.fixture
def celery_pool() -> list[str]:
    return ["--pool", "prefork", "--concurrency", "2"]


def test_nothing_is_lost_with_everything_failing_at_once(cluster, web_server, celery_worker, supervisor, bob):
    faults = standard_faults(cluster.pk, lambda: restart_redis(2), freeze_s=3)
    chaos = Chaos(web_server, ApiToken.issue(bob, "chaos")[1], cluster.pk, seconds=40, faults=faults,
                  fault_every=8, people=4, max_tokens=32, batch_lines=8)
    chaos.run()
    result = chaos.verdict()

    assert not result["problems"], result
    assert [name for name, _, _ in result["faults"]] == [name for name, _ in faults], result
    assert all(recovered is not None for _, recovered, _ in result["faults"]), f"ready again after each: {result}"
    assert result["answers"].get("person finished", 0) >= 8 and result["batch_lines"] == 8, result
    assert celery_worker.poll() is None and supervisor.poll() is None, "the worker and supervisor live on"
    assert requests.get(f"{web_server}/healthz", timeout=30).status_code in (200, 503), "the web server answers"
    engine = Deployment.objects.get(pk=cluster.pk).engine
    assert engine.get("state") == "ready" and engine.get("worker"), "the engine's worker was started again"

    deploy.stop(Deployment.objects.get(pk=cluster.pk))
    assert Deployment.objects.get(pk=cluster.pk).status == DeploymentStatus.STOPPED
    wait_until(lambda: not RpcServer.objects.filter(status=ServerStatus.RUNNING).exists(), 60,
               "every rpc-server stopped")
