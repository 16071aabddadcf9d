"""A failed or degraded deployment offers, on its own page, what can be done: re-plan it on its laptops that
are ready, redeploy it as it was, stop or remove it; a ready one offers the same, naming the laptop, as soon
as a laptop under it is offline or its rpc-server failed; and its page never says the engine is ready when the
deployment is not."""

import re

from models_app.deploying import deploy
from models_app.models import Deployment, DeploymentStatus
from nodes.models import Node, NodeStatus, RpcServer, ServerStatus
from tests.jobs.standins import ready_deployment
from tests.rows import HOST_KEY, client_for

GB = 1 << 30


def laptops() -> list[Node]:
    made = []
    for n, status in enumerate((NodeStatus.READY, NodeStatus.OFFLINE, NodeStatus.READY), start=1):
        made.append(Node.objects.create(name=f"lab-{n}", host=f"192.0.2.{n}", username="lab", host_key=HOST_KEY,
                                        usable_memory=4 * GB, speed_gb_s=10.0, status=status))
    return made


def a_deployment(status) -> Deployment:
    model = ready_deployment().model
    deployment = deploy.create(model, laptops(), 512, "even", slots=2)
    Deployment.objects.filter(pk=deployment.pk).update(status=status, is_default=True)
    deployment.refresh_from_db()
    return deployment


def test_replan_takes_the_ready_laptops_only_and_says_which_were_left_out(alice):
    failed = a_deployment(DeploymentStatus.FAILED)
    client = client_for(alice)
    page = client.get(f"/models/deployments/{failed.pk}/").content.decode()
    assert "Re-plan on its ready laptops" in page and "Redeploy as it was" in page
    question = client.get(f"/models/deployments/{failed.pk}/replan/").content.decode()
    assert "on lab-1, lab-3, with 512 tokens of context and 2 slot(s)" in question
    assert "Left out, not ready: lab-2." in question
    response = client.post(f"/models/deployments/{failed.pk}/replan/")
    fresh = Deployment.objects.exclude(pk__in=[failed.pk]).latest("pk")
    assert response["Location"] == f"/models/deployments/{fresh.pk}/"
    assert [s.node.name for s in fresh.stages.order_by("position")] == ["lab-1", "lab-3"]
    assert (fresh.ctx, fresh.slots, fresh.status, fresh.is_default) == (512, 2, DeploymentStatus.PLANNED, True)
    assert not Deployment.objects.get(pk=failed.pk).is_default


def test_redeploy_as_it_was_stops_a_degraded_one_first(alice):
    degraded = a_deployment(DeploymentStatus.DEGRADED)
    client = client_for(alice)
    assert "This deployment stops first (0 jobs running, 0 waiting" in \
        client.get(f"/models/deployments/{degraded.pk}/redeploy/").content.decode()
    client.post(f"/models/deployments/{degraded.pk}/redeploy/")
    fresh = Deployment.objects.exclude(pk=degraded.pk).latest("pk")
    assert [s.node.name for s in fresh.stages.order_by("position")] == ["lab-1", "lab-2", "lab-3"]
    old = Deployment.objects.get(pk=degraded.pk)
    assert old.status == DeploymentStatus.STOPPED and f"Replaced by deployment #{fresh.pk}" in old.status_detail


def test_nothing_starts_when_no_laptop_is_ready(alice):
    failed = a_deployment(DeploymentStatus.FAILED)
    Node.objects.update(status=NodeStatus.OFFLINE)
    client = client_for(alice)
    response = client.get(f"/models/deployments/{failed.pk}/replan/")
    assert response.status_code == 409 and "None of its laptops is ready" in response.content.decode()
    assert client.post(f"/models/deployments/{failed.pk}/replan/").status_code == 409
    assert Deployment.objects.count() == 2  # the stand-in's and this one


def test_an_ended_deployment_never_shows_its_engine_as_ready(alice):
    failed = a_deployment(DeploymentStatus.FAILED)
    Deployment.objects.filter(pk=failed.pk).update(engine={"state": "ready", "slots": 2, "busy": 1, "jobs": [7]})
    page = client_for(alice).get(f"/models/deployments/{failed.pk}/").content.decode()
    assert "Not running: the deployment is failed." in page
    assert "Ready: the model is loaded" not in page and "Slots: 1 of 2 busy" not in page


def recover_card(page: str) -> str:
    return re.search(r'<section class="card warn" id="recover"[^>]*>.*?</section>', page, re.S).group(0)


def test_a_ready_deployment_names_the_laptop_in_trouble_and_offers_the_same_recovery(alice):
    ready = a_deployment(DeploymentStatus.READY)
    Node.objects.update(status=NodeStatus.READY)
    client = client_for(alice)
    card = recover_card(client.get(f"/models/deployments/{ready.pk}/").content.decode())
    assert " hidden>" in card.split("\n")[0], "nothing to recover from"

    first, second = ready.stages.order_by("position")[:2]
    first.server = RpcServer.objects.create(node=first.node, port=50052, wanted=True, status=ServerStatus.FAILED,
                                            last_death="`sh` on 192.0.2.1 did not finish within 10 s.\n\nlog")
    first.save()
    Node.objects.filter(pk=second.node_id).update(status=NodeStatus.OFFLINE)
    card = recover_card(client.get(f"/models/deployments/{ready.pk}/").content.decode())
    assert " hidden>" not in card.split("\n")[0]
    assert '<li data-node="lab-1">lab-1: its rpc-server failed (`sh` on 192.0.2.1 did not finish within 10 s)' \
           '.</li>' in card
    assert '<li data-node="lab-2">lab-2: offline.</li>' in card
    assert "The next answer that needs it fails over" in card
    assert all(f"/models/deployments/{ready.pk}/{to}/" in card for to in ("replan", "redeploy", "stop"))
