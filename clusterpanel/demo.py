"""The demo `make run` brings up when it can: three simulated laptops, registered and probed, the
bundled model split evenly across them, and that deployment the chat page's default.

The laptops are network namespaces with their own sshd (nodes/simlan/lan.py), so they
need root; they are made fresh at each start (new host keys: the panel pins them itself,
since it made them) and removed when the panel stops. The demo's earlier deployments
go at each start (their jobs and conversations stay); `manage.py demo --reset` removes
the demo's laptops and deployments without starting anything.
"""

from pathlib import Path

from django.conf import settings

from models_app.deploying import deploy
from models_app.library.adding import ensure_bundled
from models_app.models import Deployment, DeploymentStatus
from nodes.models import ActionKind, Node, NodeAction, NodeStatus
from nodes.simlan.lan import Lan, SimLan
from nodes.tasks import run_action

LAPTOPS, CTX = 3, 2048


def harness() -> SimLan:
    return SimLan(settings.DEMO_LAN_NAME, Path(settings.DATA_DIR) / "simlan", subnet=settings.DEMO_LAN_SUBNET)


def register(lan: Lan) -> list[Node]:
    """A Node per laptop; rows left by an earlier demo are pointed at the new laptops."""
    key = Path(lan.key_path).read_text()
    nodes = []
    for laptop in lan.laptops:
        node, _ = Node.objects.update_or_create(name=laptop.name, defaults={
            "host": laptop.address, "port": 22, "username": laptop.user, "host_key": laptop.host_key,
            "presented_host_key": "", "status": NodeStatus.NEW, "private_key": key})
        action = NodeAction.objects.create(node=node, kind=ActionKind.PROBE)
        run_action(action.pk)
        action.refresh_from_db()
        if action.status != "succeeded":
            raise RuntimeError(f"probing {node} failed: {action.error}")
        nodes.append(node)
    return nodes


def start(say) -> Deployment:
    """Bring the demo up and deploy; `say(text)` reports progress. Raises on failure."""
    say(f"Demo: starting {LAPTOPS} simulated laptops on {settings.DEMO_LAN_SUBNET}…")
    nodes = register(harness().up(LAPTOPS, rate="1gbit"))
    forget_deployments()
    say("Demo: deploying the bundled model across them…")
    # "even": a layer share on each laptop, which is what the demo is for ("fastest" may put all on one).
    deployment = deploy.create(ensure_bundled(), nodes, CTX, mode="even", slots=None)  # as many slots as fit
    deploy.prepare(deployment)
    deployment.refresh_from_db()
    if deployment.status != DeploymentStatus.READY:
        raise RuntimeError(deployment.status_detail)
    if not Deployment.objects.filter(is_default=True, status__in=Deployment.ACTIVE).exists():
        Deployment.objects.filter(is_default=True).update(is_default=False)
        Deployment.objects.filter(pk=deployment.pk).update(is_default=True)
    return deployment


def demo_deployments():
    return Deployment.objects.filter(stages__node__name__startswith=f"{settings.DEMO_LAN_NAME}-").distinct()


def forget_deployments() -> None:
    """The demo's earlier deployments: stopped, then removed (their jobs and conversations stay)."""
    for old in demo_deployments().filter(status__in=Deployment.ACTIVE):
        deploy.stop(old, detail="The demo laptops were made anew.")
    for old in demo_deployments():
        Deployment.objects.filter(pk=old.pk).delete()


def reset() -> None:
    """The demo as before its first start: its laptops' rows, deployments and namespaces gone; var/ kept."""
    forget_deployments()
    Node.objects.filter(name__startswith=f"{settings.DEMO_LAN_NAME}-").delete()
    harness().down()


def stop() -> None:
    for deployment in Deployment.objects.filter(stages__node__name__startswith=f"{settings.DEMO_LAN_NAME}-",
                                                status__in=Deployment.ACTIVE).distinct():
        deploy.stop(deployment, detail="The panel stopped, and its demo laptops with it.")
    harness().down()
