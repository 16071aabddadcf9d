"""Predicted memory against what the simulated laptops and the head really hold, for two models of different
architectures (the bundled llama-architecture SmolLM2, and a qwen2 file written here whose feed-forward tensors
are over the rpc-server's 10 MiB cache threshold), each at two contexts, with one slot and with 4 slots, each
slot with a KV stream of the whole context, all of it resident once llama.cpp has cleared it (for SmolLM2 at 2048 tokens
the three slots more are 45 MiB a laptop). The qwen2 file is written once for both tests (`qwen2_file`)."""

from pathlib import Path

import pytest

from models_app.deploying import deploy
from models_app.library.adding import ensure_bundled, register_path
from models_app.models import DeploymentStatus
from models_app.pages.plan_views import accuracy
from nodes.models import ActionKind, RpcServer
from tests.conftest import wait_until
from tests.models_app.gguf_files import write_loadable_model
from tests.nodes.laptops import register_all


@pytest.fixture
def laptops(lan, transactional_db):
    return register_all(lan(3), then=ActionKind.PROBE)


@pytest.fixture(scope="module")
def qwen2_file(tmp_path_factory) -> Path:
    """The qwen2 model (about 350 MiB of f16), written once for the file's tests: each registers it anew."""
    return write_loadable_model(tmp_path_factory.mktemp("models") / "qwen2.gguf")


def deploy_and_measure(model, laptops, ctx, slots=1):
    deployment = deploy.create(model, laptops, ctx, mode="even", slots=slots)
    deploy.prepare(deployment, measure_peak=True)
    deployment.refresh_from_db()
    assert deployment.status == DeploymentStatus.READY, deployment.status_detail
    assert deployment.slots == deployment.plan["slots"] == slots
    rows = accuracy(deployment.plan)
    deploy.stop(deployment)
    wait_until(lambda: not RpcServer.objects.filter(wanted=False, pid__isnull=False).exists(), 30,
               "the deployment's servers stopped")
    return rows


def test_predictions_hold_on_the_laptops_for_two_models_at_two_contexts(laptops, supervisor, qwen2_file):
    qwen2 = register_path(qwen2_file, checksum_now=True)
    assert qwen2.architecture == "qwen2" and max(qwen2.other_tensors.values()) > 10 * 2**20
    check(ensure_bundled(), laptops, 512)  # each model at the context the other has in the test below
    check(qwen2, laptops, 2048)


def test_predictions_hold_with_four_slots_of_the_whole_context(laptops, supervisor, qwen2_file):
    qwen2 = register_path(qwen2_file, checksum_now=True)
    check(ensure_bundled(), laptops, 2048, slots=4)
    check(qwen2, laptops, 512, slots=4)


def check(model, laptops, ctx, slots=1):
    rows = deploy_and_measure(model, laptops, ctx, slots)
    assert {row["machine"] for row in rows} == {"head", *(node.name for node in laptops)}
    misses = [(row["machine"], row["predicted"] >> 20, row["measured"] >> 20) for row in rows if not row["within"]]
    assert not misses, f"{model.name} at ctx {ctx}, {slots} slots: (machine, predicted MiB, measured MiB) {misses}"
