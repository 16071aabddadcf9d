"""Deploying the bundled model over three simulated laptops (with the most slots that fit, unless told), and
refusing what cannot fit or is not a number of slots."""

import io

import pytest
from django.core.management import CommandError, call_command

from models_app.deploying import deploy
from models_app.library.adding import ensure_bundled
from models_app.models import Deployment, DeploymentStatus
from nodes.models import ActionKind, RpcServer, ServerStatus
from nodes.servers import handshake as rpc
from tests.conftest import wait_until
from tests.nodes.laptops import register_all


@pytest.fixture
def laptops(lan, transactional_db):
    return register_all(lan(3), then=ActionKind.PROBE)


def test_it_deploys_the_bundled_model_over_three_laptops_and_stops_it(laptops, supervisor):
    model = ensure_bundled()
    for node in laptops:
        node.usable_memory = 230 * 2**20
        node.save()
    out = io.StringIO()
    call_command("deploy", model.name, "--nodes", ",".join(n.name for n in laptops), "--ctx", "512",
                 "--mode", "even", stdout=out)
    deployment = Deployment.objects.get()
    assert deployment.status == DeploymentStatus.READY, deployment.status_detail
    assert "is ready" in out.getvalue() and "tensor_split" in out.getvalue()
    assert deployment.slots == 8, "nobody chose: the most of 8, 4, 2, 1 that fit 230 MiB a laptop at 512 tokens"
    assert "8 people at once, each up to 512 tokens (the KV cache takes 90 MiB in all" in out.getvalue()
    assert "8 slots: the most offered unless you choose, and they fit." in out.getvalue()
    measured = deployment.plan["measured"]
    assert set(measured) == {"head", *(n.name for n in laptops)}, "memory measured on every machine"
    assert all(value > 10 * 2**20 for value in measured.values())
    servers = [stage.server for stage in deployment.stages.select_related("server")]
    assert len(servers) == 3 and all(s.status == ServerStatus.RUNNING for s in servers)
    assert all(rpc.hello("127.0.0.1", s.local_port).devices == 1 for s in servers)
    deploy.stop(deployment)
    wait_until(lambda: not RpcServer.objects.filter(status=ServerStatus.RUNNING).exists(), 30, "every server stopped")
    assert not RpcServer.objects.filter(status=ServerStatus.RUNNING).exists()


def test_it_refuses_an_impossible_request_with_numbers_and_starts_nothing(laptops):
    model = ensure_bundled()
    for node in laptops:
        node.usable_memory = 20 * 2**20
        node.save()
    with pytest.raises(CommandError) as error:
        call_command("deploy", model.name, "--nodes", ",".join(n.name for n in laptops), "--ctx", "512")
    assert "Nothing was started" in str(error.value) and "GiB short" in str(error.value)
    assert not Deployment.objects.exists() and not RpcServer.objects.exists()


def test_it_says_when_fewer_slots_would_fit(laptops):
    model = ensure_bundled()
    for node in laptops:
        node.usable_memory = 120 * 2**20  # at 1024 tokens each laptop needs 104 MiB with 1 slot, 111 with 2, 124 with 4
        node.save()
    with pytest.raises(CommandError) as error:
        call_command("deploy", model.name, "--nodes", ",".join(n.name for n in laptops), "--ctx", "1024",
                     "--mode", "even", "--slots", "8")
    assert "with 8 slots" in str(error.value) and "With 2 slots it would fit." in str(error.value)
    assert not Deployment.objects.exists()


@pytest.mark.parametrize("slots", ["0", "65", "lots"])
def test_it_refuses_slots_outside_1_to_64_in_words(db, slots):
    with pytest.raises(CommandError, match="must be a whole number from 1 to 64 .how many people the model serves"):
        call_command("deploy", "smollm2-135m-instruct-q4_1", "--nodes", "lab-1", "--slots", slots)
    assert not Deployment.objects.exists()


def test_it_names_unknown_laptops_and_models(laptops):
    ensure_bundled()
    with pytest.raises(CommandError, match="No laptop named ghost"):
        call_command("deploy", "smollm2-135m-instruct-q4_1", "--nodes", "ghost")
    with pytest.raises(CommandError, match="No model named"):
        call_command("deploy", "no-such-model", "--nodes", laptops[0].name)
