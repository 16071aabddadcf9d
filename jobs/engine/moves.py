"""What a laptop found at a new address (nodes/laptops/refind.py) sets going for the deployments holding it: what a
laptop that drops sets going. Its engine's connections went to the old address, so a ready deployment is
marked degraded (the supervisor stops its engine) and recovered (jobs/engine/recovery.py): recovery waits for
the laptop's rpc-server, which the supervisor restarts at the new address, keeps the plan when it runs there,
and re-plans without the laptop when it does not. jobs/apps.py hands it to nodes/laptops/holds.py."""

from django.db import transaction

from jobs import task_messages
from models_app.models import Deployment, DeploymentStatus
from nodes.servers import rpcserver


def settle_s() -> float:
    """How long recovery waits after a move. It keeps a laptop whose server runs again within 10 s of asking
    (jobs/engine/comeback.py); the supervisor may be in a round at the old address when the laptop moves, and that
    round ends only when its command gives up (up to rpcserver.quick_s()): recovery starts after that, so the
    laptop is not left out for a round's wait."""
    return rpcserver.quick_s()


def laptop_moved(node, was: str) -> list[str]:
    """Each holding deployment's part, in words ("standin #3 recovers: ...")."""
    said = []
    for deployment in Deployment.objects.filter(stages__node=node, status__in=Deployment.ACTIVE).distinct():
        if deployment.status == DeploymentStatus.READY:
            deployment.set_status(DeploymentStatus.DEGRADED,
                                  f"{node.name} moved to {node.host} (was {was}). Re-planning; it keeps its place "
                                  "once its rpc-server runs at the new address.")
            transaction.on_commit(lambda pk=deployment.pk: task_messages.recover_deployment(pk, [node.name], [],
                                                                                       countdown=settle_s()))
            said.append(f"{deployment} recovers as after a dropped laptop: {node.name} keeps its place once its "
                        "rpc-server runs at the new address")
        elif deployment.status == DeploymentStatus.DEGRADED:
            said.append(f"{deployment} is already recovering: it finds {node.name} at the new address")
        else:
            said.append(f"{deployment} is still being deployed: it goes on at the new address, or fails saying "
                        "why and can be deployed again")
    return said
