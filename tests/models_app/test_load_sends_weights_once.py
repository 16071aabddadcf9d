"""A deployment sends each weight into the laptops once, for a model whose layer tensors are all under upstream's
10 MiB cache threshold: pre-seeded (or cached by the first load when pre-seeding is off), then asked for by hash
by the verification load and the engine's load alike (scripts/llama_patches/0002). Real sshd, rpc-servers,
supervisor and engine; bytes counted on each laptop's own link."""

import subprocess
from pathlib import Path

import pytest

from models_app.deploying import deploy, tensor_cache
from models_app.library.adding import register_path
from models_app.models import Deployment, DeploymentStatus
from nodes.models import ActionKind, RpcServer, ServerStatus
from tests.conftest import wait_until
from tests.jobs.cluster import end_engines, engine_ready
from tests.models_app.gguf_files import write_loadable_model
from tests.nodes.laptops import register_all

ONCE = 1.15  # a weight's bytes plus what carries them: frame and packet headers, SSH, the RPC messages


@pytest.fixture(scope="module")
def small_tensors(tmp_path_factory) -> Path:
    """8 layers of tensors of at most 2 MiB (only output.weight, 48 MiB, is over 10 MiB): about 110 MiB."""
    return write_loadable_model(tmp_path_factory.mktemp("models") / "small.gguf", layers=8, embd=512, ffn=2048)


@pytest.fixture
def laptops(lan, transactional_db):
    made = register_all(lan(3), then=ActionKind.PROBE)
    for laptop in lan(3).laptops:
        subprocess.run(["rm", "-rf", str(Path(laptop.home) / ".clusterpanel" / "cache" / "rpc")], check=True)
    yield made
    end_engines()


def rx_bytes(laptop) -> int:
    out = subprocess.run(["ip", "netns", "exec", laptop.netns, "cat", "/sys/class/net/eth0/statistics/rx_bytes"],
                         capture_output=True, text=True, check=True).stdout
    return int(out)


def weights_per_laptop(deployment: Deployment) -> list[int]:
    """Bytes of every tensor the plan puts on each laptop, whatever its size, in pipeline order."""
    model, plan = deployment.model, deployment.plan
    every = tensor_cache.cached_tensors(Path(model.path), threshold=0)
    devices = tensor_cache.tensors_per_device(every, "output.weight" in every, model.n_layer, plan["n_gpu_layers"],
                                              tuple(plan["tensor_split"]))
    return [sum(t["size"] for t in device.values()) for device in devices]


@pytest.mark.parametrize("preseed", [True, False], ids=["pre-seeded", "not-pre-seeded"])
def test_it_sends_each_weight_once_from_caches_to_the_engines_model(lan, laptops, supervisor, small_tensors,
                                                                   monkeypatch, preseed):
    model = register_path(small_tensors, name="small-tensors")
    by_address = {laptop.address: laptop for laptop in lan(3).laptops}
    before: dict[str, int] = {}
    real_fill, real_verify = deploy.fill_caches, deploy.verify_load

    def counting_from_here(real):  # the runtime's install, before, is no part of a load
        def step(deployment, stages, *rest):
            if not before:
                before.update({s.node.name: rx_bytes(by_address[s.node.host]) for s in stages})
            return real(deployment, stages, *rest)
        return step

    monkeypatch.setattr(deploy, "fill_caches", counting_from_here(real_fill))
    monkeypatch.setattr(deploy, "verify_load", counting_from_here(real_verify))
    deployment = deploy.create(model, laptops, 512, "even", preseed=preseed)
    deploy.prepare(deployment)
    deployment.refresh_from_db()
    assert deployment.status == DeploymentStatus.READY, deployment.status_detail
    engine_ready(deployment, within=300)

    threshold = tensor_cache.hash_threshold()
    for stage, weights in zip(deployment.stages.select_related("node").order_by("position"),
                              weights_per_laptop(deployment), strict=True):
        received = rx_bytes(by_address[stage.node.host]) - before[stage.node.name]
        assert weights < received <= ONCE * weights, (
            f"{stage.node} received {received / 2**20:.1f} MiB for {weights / 2**20:.1f} MiB of weights "
            f"({received / weights:.2f}x); the head's RPC client asks for weights by hash only over "
            f"{threshold / 2**20:g} MiB (scripts/llama_patches/0002 makes it every weight)")
    deploy.stop(deployment)
    wait_until(lambda: not RpcServer.objects.filter(status=ServerStatus.RUNNING).exists(), 60, "every server stopped")
