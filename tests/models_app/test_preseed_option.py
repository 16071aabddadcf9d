"""Pre-seeding is offered on the plan page, on by default, and the admin's choice reaches the deployment."""

from models_app.library.adding import ensure_bundled
from models_app.models import Deployment
from nodes.models import Node
from tests.conftest import PASSWORD

HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"


def plan_inputs(model, node, **extra) -> dict:
    return {"model": model.pk, "nodes": [node.pk], "ctx": 512, "mode": "even", **extra}


def test_it_offers_pre_seeding_checked_and_passes_the_choice_to_the_deployment(alice, client):
    model = ensure_bundled()
    node = Node.objects.create(name="lap", host="192.0.2.1", username="u", host_key=HOST_KEY,
                               usable_memory=2**30)
    client.login(username="alice", password=PASSWORD)
    blank = client.get("/models/plan/").content.decode()
    assert 'name="preseed"' in blank and "checked" in blank.split('name="preseed"')[1].split(">")[0]

    chosen = client.get("/models/plan/", plan_inputs(model, node, preseed="on")).content.decode()
    assert '<input type="hidden" name="preseed" value="on">' in chosen
    client.post("/models/deployments/new/", plan_inputs(model, node, preseed="on"))
    client.post("/models/deployments/new/", plan_inputs(model, node))
    assert [d.preseed for d in Deployment.objects.order_by("pk")] == [True, False]
    page = client.get(f"/models/deployments/{Deployment.objects.first().pk}/").content.decode()
    assert "no pre-seeding" in page and "Tensor cache" in page
