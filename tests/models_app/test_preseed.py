"""Pre-seeding the laptops' rpc-server caches: the same files llama.cpp itself would cache, and a load that then
sends only hashes. Real sshd, real rpc-servers, a real model of 10.5 MiB feed-forward tensors. Which tensors go
by hash is the head's RPC client's to say (tensor_cache.hash_threshold): over 10 MiB upstream, all with 0002."""

import subprocess
from pathlib import Path

import gguf
import pytest
from django.core.management import CommandError, call_command

from models_app.deploying import deploy, preseed
from models_app.deploying.tensor_cache import HASH_THRESHOLD, cache_name, fnv1a_64, hash_threshold
from models_app.library.adding import ensure_bundled, register_path
from models_app.models import Deployment, DeploymentStatus
from nodes.models import ActionKind, RpcServer, ServerStatus
from tests.conftest import wait_until
from tests.models_app.gguf_files import write_loadable_model
from tests.nodes.laptops import register_all


@pytest.fixture(scope="module")
def qwen2_file(tmp_path_factory) -> Path:
    return write_loadable_model(tmp_path_factory.mktemp("models") / "qwen2.gguf")


@pytest.fixture
def laptops(lan, transactional_db):
    made = register_all(lan(3), then=ActionKind.PROBE)
    for laptop in lan(3).laptops:
        subprocess.run(["rm", "-rf", cache_dir(laptop)], check=True)
    return made


@pytest.fixture
def load_traffic(lan, monkeypatch) -> dict[str, int]:
    """Bytes each laptop received during the verification load alone (its eth0 inside its namespace)."""
    by_address = {laptop.address: laptop for laptop in lan(3).laptops}
    received, real = {}, deploy.verify_load

    def measured(deployment, stages, *rest):
        before = {s.node.name: rx_bytes(by_address[s.node.host]) for s in stages}
        real(deployment, stages, *rest)
        received.update({s.node.name: rx_bytes(by_address[s.node.host]) - before[s.node.name] for s in stages})

    monkeypatch.setattr(deploy, "verify_load", measured)
    return received


def cache_dir(laptop) -> Path:
    return Path(laptop.home) / ".clusterpanel" / "cache" / "rpc"


def make_cache_dir(laptop, writable: bool = True) -> Path:
    """The cache folder, made by root as the laptop's user would have it (or, not `writable`, owned by root)."""
    folder = cache_dir(laptop)
    folder.mkdir(parents=True, exist_ok=True)
    for path in (folder.parent.parent, folder.parent, *([folder] if writable else [])):
        subprocess.run(["chown", laptop.user, str(path)], check=True)
    return folder


def cached_files(laptop) -> set[str]:
    folder = cache_dir(laptop)
    return {p.name for p in folder.iterdir()} if folder.is_dir() else set()


def rx_bytes(laptop) -> int:
    out = subprocess.run(["ip", "netns", "exec", laptop.netns, "cat", "/sys/class/net/eth0/statistics/rx_bytes"],
                         capture_output=True, text=True, check=True).stdout
    return int(out)


def deploy_over(model, laptops, *flags: str) -> Deployment:
    call_command("deploy", model.name, "--nodes", ",".join(n.name for n in laptops), "--ctx", "512",
                 "--mode", "even", *flags)
    deployment = Deployment.objects.latest("pk")
    assert deployment.status == DeploymentStatus.READY, deployment.status_detail
    return deployment


def stop(deployment: Deployment) -> None:
    deploy.stop(deployment)
    wait_until(lambda: not RpcServer.objects.filter(status=ServerStatus.RUNNING).exists(), 30, "every server stopped")


def laptop_of(lan, node):
    return next(laptop for laptop in lan(3).laptops if laptop.address == node.host)


def expected_files(deployment: Deployment) -> list[set[str]]:
    return [{t.hash for t in tensors} for tensors in preseed.needed(deployment)]


def held(deployment: Deployment) -> list[set[str]]:
    """Worked out from the file alone: per laptop, the cache names of the tensors of its layers (the output's on
    the one holding layer n_layer, the embedding's when the model ties them) that the head asks for by hash."""
    model, reader = deployment.model, gguf.GGUFReader(deployment.model.path)
    tied = "output.weight" not in {t.name for t in reader.tensors}

    def layer_of(name: str) -> int | None:
        if name.startswith("blk."):
            return int(name.split(".")[1])
        return model.n_layer if name.startswith("output") or (tied and name == "token_embd.weight") else None

    found = []
    for stage in deployment.stages.order_by("position"):
        layers = range(stage.first_layer, stage.first_layer + stage.layer_count)
        found.append({cache_name(fnv1a_64(t.data.tobytes())) for t in reader.tensors
                      if t.n_bytes > hash_threshold() and layer_of(t.name) in layers})
    return found


def test_without_preseeding_llama_cpp_caches_exactly_the_files_we_compute(lan, laptops, supervisor, qwen2_file,
                                                                           load_traffic):
    model = register_path(qwen2_file, name="qwen2", checksum_now=True)
    deployment = deploy_over(model, laptops, "--no-preseed")
    expected = expected_files(deployment)
    assert all(expected) and expected == held(deployment)
    if hash_threshold() == HASH_THRESHOLD:
        assert sum(len(files) for files in expected) == 6 * 3 + 1  # ffn gate/up/down + output
    for stage, files in zip(deployment.stages.select_related("node"), expected, strict=True):
        assert cached_files(laptop_of(lan, stage.node)) == files, f"{stage.node}'s cache"
        assert stage.preseed == {}
        needed = sum(t.size for t in preseed.needed(deployment)[stage.position])
        assert load_traffic[stage.node.name] > needed, "without a cache the load sends the tensors"
    stop(deployment)


def test_without_preseeding_a_tied_output_caches_the_embedding_on_the_last_laptop(lan, laptops, supervisor):
    model = ensure_bundled()  # SmolLM2: no output.weight; its 28.7 MiB token_embd is its only tensor over 10 MiB
    deployment = deploy_over(model, laptops[:2], "--no-preseed")
    first, last = expected_files(deployment)
    assert [first, last] == held(deployment)
    assert model.tensor_hashes["tensors"]["token_embd.weight"]["hash"] in last
    assert (first == set()) == (hash_threshold() == HASH_THRESHOLD)  # every SmolLM2 layer tensor is under 10 MiB
    assert cached_files(lan(3).laptops[0]) == first and cached_files(lan(3).laptops[1]) == last
    stop(deployment)


def test_preseeded_caches_hold_the_same_files_and_the_load_sends_only_hashes(lan, laptops, supervisor, qwen2_file,
                                                                            load_traffic):
    model = register_path(qwen2_file, name="qwen2", checksum_now=True)
    first = make_cache_dir(lan(3).laptops[0])
    (first / model.tensor_hashes["tensors"]["blk.0.ffn_up.weight"]["hash"]).write_bytes(b"cut short")

    deployment = deploy_over(model, laptops)
    for stage, files in zip(deployment.stages.select_related("node"), expected_files(deployment), strict=True):
        assert cached_files(laptop_of(lan, stage.node)) == files, f"{stage.node}'s cache"
        cached = stage.preseed["cached_bytes"]
        assert stage.preseed["state"] == "done" and stage.preseed["sent"] == cached
        assert load_traffic[stage.node.name] < cached / 4, f"{stage.node}: the load sent more than hashes"
    sizes = {t.hash: t.size for t in preseed.needed(deployment)[0]}  # the cut-short file was sent again, whole
    assert all(p.stat().st_size == sizes[p.name] for p in first.iterdir() if p.name in sizes)
    stop(deployment)

    again = deploy_over(model, laptops)
    assert all(stage.preseed["sent"] == 0 and stage.preseed["copied_files"] == 0 for stage in again.stages.all())
    stop(again)


def test_a_laptop_whose_cache_cannot_be_written_fails_the_deployment_plainly(lan, laptops, supervisor, qwen2_file):
    model = register_path(qwen2_file, name="qwen2", checksum_now=True)
    locked = make_cache_dir(lan(3).laptops[1], writable=False)
    try:
        with pytest.raises(CommandError) as error:
            call_command("deploy", model.name, "--nodes", ",".join(n.name for n in laptops), "--ctx", "512",
                         "--mode", "even")
        deployment = Deployment.objects.get()
        assert deployment.status == DeploymentStatus.FAILED
        assert f"Could not fill the rpc-server cache on {laptops[1].name}" in str(error.value)
        assert "Permission denied" in deployment.status_detail
        assert cached_files(lan(3).laptops[1]) == set()
        for laptop in (lan(3).laptops[0], lan(3).laptops[2]):
            assert all(len(name) == 16 or name.endswith(".part") for name in cached_files(laptop))
        wait_until(lambda: not RpcServer.objects.filter(status=ServerStatus.RUNNING).exists(), 30, "servers stopped")
    finally:
        subprocess.run(["rm", "-rf", str(locked)], check=True)


def test_a_missing_model_file_is_named(lan, laptops, supervisor, tmp_path):
    path = write_loadable_model(tmp_path / "gone.gguf", layers=2)
    model = register_path(path, name="gone", checksum_now=True)
    path.unlink()
    with pytest.raises(CommandError, match=f"Cannot read the model file {path}"):
        call_command("deploy", model.name, "--nodes", laptops[0].name, "--ctx", "512")
    wait_until(lambda: not RpcServer.objects.filter(status=ServerStatus.RUNNING).exists(), 30, "servers stopped")
