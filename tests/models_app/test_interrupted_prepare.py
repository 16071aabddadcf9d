"""A deployment whose preparing process died (the OOM killer, Ctrl-C under make run) does not stay "preparing"
for good: when an ordinary Celery worker starts on the same machine, it fails saying so and its rpc-servers are
let go. A deployment still being prepared by a live process (the demo, `manage.py deploy`) is left alone, and so
is one prepared on another machine, whose processes cannot be seen from here."""

import subprocess
import sys

import pytest

from models_app.deploying import deploy
from models_app.models import Deployment, DeploymentStage, DeploymentStatus, GgufModel
from nodes.models import Node, RpcServer
from tests.celery_workers import start_worker
from tests.conftest import ROOT, child_env, stop

HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
CLAIM_AND_HANG = """
import django, os, sys, time
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clusterpanel.settings")
django.setup()
from models_app.deploying import deploy
from models_app.models import Deployment
assert deploy.claim(Deployment.objects.get(pk=int(sys.argv[1])))
print("claimed", flush=True)
time.sleep(600)
"""


@pytest.fixture
def model(transactional_db) -> GgufModel:
    return GgufModel.objects.create(name="tiny", path="/nonexistent/tiny.gguf", size=1, architecture="llama",
                                    n_layer=2, n_embd=8, n_head=1, n_head_kv=1, context_length=2048,
                                    vocab_size=32, file_type="Q4_1")


def planned(model: GgufModel, laptop: str) -> Deployment:
    """A deployment with one stage on `laptop`, whose rpc-server is wanted."""
    deployment = Deployment.objects.create(model=model, ctx=1024, plan={}, preseed=False)
    node = Node.objects.create(name=laptop, host=f"10.0.0.{laptop[-1]}", username="lab", host_key=HOST_KEY)
    DeploymentStage.objects.create(deployment=deployment, position=0, node=node, first_layer=0, layer_count=2,
                                   memory={}, server=RpcServer.objects.create(node=node))
    return deployment


def claimed_by_a_process_that_dies(deployment: Deployment) -> None:
    """Claimed for preparing by another process, which is then killed as the OOM killer would kill it."""
    preparer = subprocess.Popen([sys.executable, "-c", CLAIM_AND_HANG, str(deployment.pk)], cwd=ROOT,
                                env=child_env(), stdout=subprocess.PIPE)
    try:
        assert preparer.stdout.readline() == b"claimed\n"
    finally:
        preparer.kill()
        preparer.wait()


def state(deployment: Deployment) -> tuple[str, str, bool]:
    deployment.refresh_from_db()
    return deployment.status, deployment.status_detail, RpcServer.objects.get(stage__deployment=deployment).wanted


def test_it_fails_a_deployment_whose_preparing_process_died(model, tmp_path):
    dead = planned(model, "lab-1")
    claimed_by_a_process_that_dies(dead)
    loading = planned(model, "lab-2")
    claimed_by_a_process_that_dies(loading)
    loading.refresh_from_db()
    loading.set_status(DeploymentStatus.LOADING, "Loading the model across the laptops.")
    assert state(dead)[0] == DeploymentStatus.PREPARING

    worker = start_worker(tmp_path / "worker.log")
    stop(worker)
    for deployment in (dead, loading):
        status, detail, wanted = state(deployment)
        assert status == DeploymentStatus.FAILED, (status, detail)
        assert detail.startswith("Interrupted: the process preparing it stopped (process ") and "ended" in detail
        assert not wanted, "its rpc-server is let go"


def test_it_leaves_alone_a_deployment_that_a_live_process_or_another_machine_prepares(model, tmp_path):
    live = planned(model, "lab-1")
    assert deploy.claim(live)  # this test's own process prepares it, as the demo prepares in its own
    elsewhere = planned(model, "lab-2")
    claimed_by_a_process_that_dies(elsewhere)
    Deployment.objects.filter(pk=elsewhere.pk).update(preparing_by="another-host/4026531836:12345:678")
    reused = planned(model, "lab-3")
    assert deploy.claim(reused)
    pid_taken_again = reused.preparing_by.rsplit(":", 1)[0] + ":1"  # this pid, but started at another time
    Deployment.objects.filter(pk=reused.pk).update(preparing_by=pid_taken_again)

    worker = start_worker(tmp_path / "worker.log")
    stop(worker)
    assert state(live) == (DeploymentStatus.PREPARING, "Installing the runtime and starting rpc-servers.", True)
    assert state(elsewhere)[0] == DeploymentStatus.PREPARING and state(elsewhere)[2]
    status, detail, wanted = state(reused)
    assert status == DeploymentStatus.FAILED and "a new one took its pid" in detail and not wanted
