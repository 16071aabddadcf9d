"""A laptop's actions and rpc-servers as the API shows them (nodes/api/laptops.py, nodes/api/actions.py)."""

from django.urls import reverse

from nodes.models import NodeAction, RpcServer


def action_row(action: NodeAction) -> dict:
    where = {"name": action.laptop_name, "pk": action.pk}
    return {**action.payload(), "node": action.laptop_name, "created": action.created, "started": action.started,
            "finished": action.finished, "url": reverse("api:get_action", kwargs=where),
            "events": reverse("api:follow_action", kwargs=where)}


def server_row(server: RpcServer) -> dict:
    stage = getattr(server, "stage", None)
    return {"port": server.port, "wanted": server.wanted, "status": server.status, "pid": server.pid,
            "restarts": server.restarts, "last_death": server.last_death, "endpoint": server.endpoint,
            "deployment": stage.deployment_id if stage else None, "devices": server.devices or ["CPU"]}
