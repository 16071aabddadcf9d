"""A re-plan after a laptop's death keeps the deployment's slots: the laptops left must hold the KV cache of as
many people as before, or the deployment fails saying so (and how many slots would fit), rather than coming
back quietly serving fewer."""

from jobs.engine import recovery
from models_app.library.adding import ensure_bundled
from models_app.models import Deployment, DeploymentStatus
from nodes.models import Node

HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
MiB = 2**20


def test_it_re_plans_with_the_deployments_slots(db):
    deployment = Deployment.objects.create(model=ensure_bundled(), ctx=1024, slots=4, mode="even", plan={},
                                           status=DeploymentStatus.DEGRADED)
    for position in range(3):
        # Two of them hold the model at 1024 tokens with 1 or 2 slots (129 MiB at most), not with 4 (150 MiB).
        node = Node.objects.create(name=f"lab-{position + 1}", host=f"10.0.0.{position + 2}", username="lab",
                                   host_key=HOST_KEY, usable_memory=140 * MiB)
        deployment.stages.create(position=position, node=node, first_layer=10 * position, layer_count=10, memory={})
    assert recovery.bring_back(deployment, ["lab-3"], []) is False
    deployment.refresh_from_db()
    assert deployment.status == DeploymentStatus.FAILED
    assert "no longer fits without lab-3" in deployment.status_detail
    assert "with 4 slots" in deployment.status_detail and "With 2 slots it would fit." in deployment.status_detail
