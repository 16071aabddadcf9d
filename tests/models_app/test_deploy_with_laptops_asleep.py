"""A deployment planned over laptops of which half went to sleep before it started: it fails at once naming
each sleeping laptop (not only the first), the awake ones are not blamed, and nothing is left half-deployed."""

import contextlib

from models_app import deploy
from models_app.library import ensure_bundled
from models_app.models import DeploymentStatus
from nodes.models import ActionKind, RpcServer
from tests.nodes.laptops import register_all
from tests.nodes.trouble import asleep


def test_half_the_laptops_asleep_are_each_named_and_nothing_is_left(lan, transactional_db):
    the_lan = lan(4)
    nodes = register_all(the_lan, then=ActionKind.PROBE)[:4]
    deployment = deploy.create(ensure_bundled(), nodes, 512, mode="even")
    sleeping = [the_lan.laptops[1], the_lan.laptops[3]]
    with contextlib.ExitStack() as lids:
        for laptop in sleeping:
            lids.enter_context(asleep(laptop))
        deploy.prepare(deployment)
    deployment.refresh_from_db()
    assert deployment.status == DeploymentStatus.FAILED
    assert deployment.status_detail.startswith("2 of 4 laptops cannot take part: "), deployment.status_detail
    named = {node.name for node in nodes if f"{node.name}: " in deployment.status_detail}
    assert named == {nodes[1].name, nodes[3].name}, deployment.status_detail
    assert not RpcServer.objects.filter(wanted=True).exists(), "no rpc-server started for a failed deployment"
