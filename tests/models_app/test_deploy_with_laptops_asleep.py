"""A deployment planned over three laptops of which two went to sleep before it started: it fails at once naming
each sleeping laptop (not only the first), the awake ones are not blamed, and nothing is left half-deployed."""

import contextlib

from models_app.deploying import deploy
from models_app.library.adding import ensure_bundled
from models_app.models import DeploymentStatus
from nodes.models import ActionKind, RpcServer
from tests.nodes.laptops import register_all
from tests.nodes.trouble import asleep


def test_half_the_laptops_asleep_are_each_named_and_nothing_is_left(lan, transactional_db):
    the_lan = lan(3)  # the session's LAN: more laptops would change what the other tests find on it
    nodes = register_all(the_lan, then=ActionKind.PROBE)[:3]
    deployment = deploy.create(ensure_bundled(), nodes, 512, mode="even")
    sleeping = [the_lan.laptops[0], the_lan.laptops[2]]
    with contextlib.ExitStack() as lids:
        for laptop in sleeping:
            lids.enter_context(asleep(laptop))
        deploy.prepare(deployment)
    deployment.refresh_from_db()
    assert deployment.status == DeploymentStatus.FAILED
    assert deployment.status_detail.startswith("2 of 3 laptops cannot take part: "), deployment.status_detail
    named = {node.name for node in nodes if f"{node.name}: " in deployment.status_detail}
    assert named == {nodes[0].name, nodes[2].name}, deployment.status_detail
    assert not RpcServer.objects.filter(wanted=True).exists(), "no rpc-server started for a failed deployment"
