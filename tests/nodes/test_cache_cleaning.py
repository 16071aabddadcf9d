"""A laptop's rpc cache past its cap, on a simulated laptop through its own sshd: the least recently used tensor
files that no deployment on the laptop needs go until the cache and downloads fit; what a live deployment needs
stays, and so does what a deployment that begins loading while the clean runs needs; names that are not a
tensor's are never touched; a clean that cannot be sure removes nothing. The files are small fakes with
16-hex names; the deployments that need them are database rows, as the planner would have written them."""

import os
import subprocess
import time
from pathlib import Path

import pytest

from models_app.deploying import deploy, preseed
from models_app.deploying.tensor_cache import file_stamp, hash_threshold
from models_app.models import Deployment, DeploymentStage, DeploymentStatus, GgufModel, ModelStatus
from nodes import tasks
from nodes.models import ActionKind, NodeStatus
from nodes.servers import cache as rpccache
from nodes.servers import cleaning
from tests.nodes.laptops import register, run_now
from tests.rows import client_for

MiB = 2**20
CAP = 9 * MiB
TENSORS = ["blk.0.ffn_up.weight", "blk.0.ffn_down.weight", "blk.1.ffn_up.weight", "output.weight"]
# Four files of 1 MiB per model, each last used at the moment given (seconds since 1970): a's the oldest.
FILES = {model: [(f"{model * 4}00000000000{i}", moment + i) for i in range(4)]
         for model, moment in (("a", 50), ("b", 200), ("c", 300))}
OLD_STRAY, NEW_STRAY = ("eeee000000000000", 100), ("eeee000000000001", 400)  # of no model in the library
ODD = ["-rf x;y", "ABCD000000000000", f"{FILES['c'][0][0]}.part"]  # never removed, whatever their size


@pytest.fixture
def laptop(lan, transactional_db):
    """A laptop with its own install folder (other tests' caches stay apart), ready, with a cap of 9 MiB."""
    the_lan = lan(1)
    machine = the_lan.laptops[0]
    node = register(the_lan, machine, name="cachey")
    node.install_dir, node.status, node.cache_cap = "~/.cachetest", NodeStatus.READY, CAP
    node.save()
    root = Path(machine.home) / ".cachetest"
    subprocess.run(["rm", "-rf", str(root)], check=True)
    yield node, machine, root
    subprocess.run(["rm", "-rf", str(root)], check=True)


@pytest.fixture
def models(tmp_path) -> dict[str, GgufModel]:
    return {name: model_of(name, [file for file, _ in files], tmp_path) for name, files in FILES.items()}


def model_of(name: str, hashes: list[str], folder: Path) -> GgufModel:
    """A model in the library whose tensors hash to `hashes` (taken for its file as it is, for the head's
    threshold: nothing is hashed again)."""
    path = folder / f"{name}.gguf"
    path.write_bytes(b"GGUF")
    tensors = {tensor: {"hash": digest, "offset": 0, "size": MiB}
               for tensor, digest in zip(TENSORS, hashes, strict=True)}
    return GgufModel.objects.create(
        name=name, path=str(path), size=4, status=ModelStatus.READY, architecture="llama", n_layer=2, n_embd=8,
        n_head=1, n_head_kv=1, context_length=2048, vocab_size=32, file_type="Q4_1",
        other_tensors={"output.weight": MiB},
        tensor_hashes={"file": file_stamp(path), "threshold": hash_threshold(), "tensors": tensors})


def deployed(model: GgufModel, node, status: str) -> Deployment:
    """All its layers and its output on `node`: every one of its four files goes there."""
    plan = {"n_gpu_layers": 3, "tensor_split": [1],
            "stages": [{"machine": "head", "count": 0}, {"machine": node.name, "count": 3}]}
    deployment = Deployment.objects.create(model=model, ctx=512, plan=plan, status=status)
    DeploymentStage.objects.create(deployment=deployment, position=0, node=node, first_layer=0, layer_count=3,
                                   memory={})
    return deployment


def fill(machine, root: Path) -> None:
    """14 MiB of tensor files, odd names, a copy being written and 1 MiB of downloads: 15.5 MiB over a 9 MiB cap."""
    cache, downloads = root / "cache" / "rpc", root / "downloads"
    cache.mkdir(parents=True)
    downloads.mkdir()
    (downloads / "clusterpanel-runtime-x86_64.tar.gz").write_bytes(b"\0" * MiB)
    for name, moment in [file for files in FILES.values() for file in files] + [OLD_STRAY, NEW_STRAY]:
        (cache / name).write_bytes(os.urandom(MiB))
        os.utime(cache / name, (moment, moment))
    for name in ODD:
        (cache / name).write_bytes(b"\0" * (MiB // 2 if name.endswith(".part") else 10))
        os.utime(cache / name, (1, 1))  # older than anything
    (cache / "dddd000000000000").mkdir()  # a folder with a tensor's name is no file of the cache
    subprocess.run(["chown", "-R", machine.user, str(root)], check=True)


def left(root: Path) -> set[str]:
    return {path.name for path in (root / "cache" / "rpc").iterdir()}


def names(model: str, *which: int) -> set[str]:
    return {FILES[model][i][0] for i in (which or range(4))}


def test_it_keeps_what_a_live_deployment_needs_and_the_most_recently_used(laptop, models, alice):
    node, machine, root = laptop
    deployed(models["a"], node, DeploymentStatus.READY)
    deployed(models["b"], node, DeploymentStatus.STOPPED)  # stopped: its files are as any unused ones
    fill(machine, root)
    before = time.time()

    assert tasks.clean_caches() == 1, "the hourly task cleans every ready laptop"
    stays = names("a") | names("c", 2, 3) | {NEW_STRAY[0]} | set(ODD) | {"dddd000000000000"}
    assert left(root) == stays
    assert (root / "downloads" / "clusterpanel-runtime-x86_64.tar.gz").exists()
    assert all((root / "cache" / "rpc" / name).stat().st_mtime >= before - 1 for name in names("a")), \
        "what a live deployment needs is marked used at each clean"

    node.refresh_from_db()
    state = node.cache_state
    assert (state["removed"], state["freed"], state["cap"], state["needed"]) == (7, 7 * MiB, CAP, 4 * MiB)
    assert state["cache"] + state["downloads"] <= CAP and state["free"] > 0 and state["disk"] > state["free"]
    held = {row["model"]: (row["files"], row["bytes"], row["needed"]) for row in state["models"]}
    assert held == {"a": (4, 4 * MiB, 4 * MiB), "c": (2, 2 * MiB, 0), None: (4, MiB + MiB // 2 + 20, 0)}

    page = client_for(alice).get("/nodes/cachey/").content.decode()
    assert "not used by any model here" in page and 'id="clean-cache"' in page
    assert "of a 9 MiB cap (set by hand" in " ".join(page.split())


def test_a_deployment_that_begins_loading_while_the_clean_lists_loses_nothing(laptop, models, monkeypatch):
    node, machine, root = laptop
    fill(machine, root)
    listing = rpccache.listing

    def listed_as_b_begins_loading(*args):
        found = listing(*args)
        deployed(models["b"], node, DeploymentStatus.LOADING)
        return found

    monkeypatch.setattr(rpccache, "listing", listed_as_b_begins_loading)
    action = run_now(node, ActionKind.CLEAN_CACHE)
    assert action.status == "succeeded", action.error
    assert action.message.startswith("Removed 7 files (7 MiB), the least recently used"), action.message
    # a's files, the oldest, went first, then the old stray and c's oldest two: b's, needed, were passed over.
    assert left(root) == names("b") | names("c", 2, 3) | {NEW_STRAY[0]} | set(ODD) | {"dddd000000000000"}


def test_a_clean_that_cannot_be_sure_removes_nothing(laptop, models, monkeypatch, tmp_path):
    node, machine, root = laptop
    fill(machine, root)
    everything = left(root)
    monkeypatch.setattr(cleaning, "WAIT_FOR_LOCK_S", 1)
    with rpccache.locked(node.pk, 1, "held by the test"), pytest.raises(rpccache.CacheError, match="filling"):
        cleaning.clean(node, "while a pre-seed copies")
    assert left(root) == everything

    lost = model_of("lost", [name for name, _ in FILES["c"]], tmp_path)
    Path(lost.path).unlink()
    GgufModel.objects.filter(pk=lost.pk).update(tensor_hashes=None)  # never hashed, and its file is gone
    deployed(GgufModel.objects.get(pk=lost.pk), node, DeploymentStatus.READY)
    action = run_now(node, ActionKind.CLEAN_CACHE)
    assert action.status == "failed" and action.error.startswith("Nothing was removed: which files"), action.error
    assert "lost #" in action.error and left(root) == everything


def test_each_deployment_cleans_its_laptops_caches_once_it_has_filled_them(laptop, models, monkeypatch):
    node, _, _ = laptop
    deployment = deployed(models["a"], node, DeploymentStatus.PREPARING)
    asked = []
    monkeypatch.setattr(preseed, "fill_caches", lambda *args: None)
    monkeypatch.setattr(tasks.clean_caches, "delay", lambda ids, why: asked.append((ids, why)))
    deploy.fill_caches(deployment, list(deployment.stages.select_related("node")))
    assert asked == [([node.pk], f"after deployment #{deployment.pk} filled it")]
