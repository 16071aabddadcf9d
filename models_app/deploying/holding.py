"""The deployments' answers to what nodes/laptops/holds.py asks about a laptop: which deployments hold it, which used
it, what losing one of its rpc-servers ends. Registered when the app starts (models_app/apps.py)."""

from models_app.library.removal import in_flight
from models_app.models import Deployment
from nodes.laptops.holds import Holder


def holders(node) -> list[Holder]:
    held = Deployment.objects.filter(stages__node=node, status__in=Deployment.ACTIVE).distinct()
    return [Holder(f"{d.model.name} #{d.pk}", d.get_status_display().lower()) for d in held.select_related("model")]


def used_by(nodes) -> int:
    return Deployment.objects.filter(stages__node__in=nodes).distinct().count()


def forget_used(nodes) -> None:
    Deployment.objects.filter(stages__node__in=nodes).delete()


def losing(server) -> str | None:
    """"standin #3 loses layers 0–9: it has 1 job running, 0 waiting", when a running deployment uses `server`."""
    stage = getattr(server, "stage", None)
    deployment = stage.deployment if stage else None
    if deployment is None or not deployment.is_active:
        return None
    losing = (f"{deployment} loses layers {stage.first_layer}–{stage.first_layer + stage.layer_count - 1}"
              if stage.layer_count else f"{deployment} loses a stage")
    return f"{losing}: it has {in_flight(deployment)}"
