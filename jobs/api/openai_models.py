"""What `GET /v1/models` lists: every model a request may name, ready ones with their deployments' figures, then
on-call models that nothing serves, with their state."""

from collections import Counter

from jobs.queue import queueing
from models_app.models import DeploymentStatus, OnCall
from models_app.oncall import service as oncall


def answers(deployment) -> bool:
    return deployment.status == DeploymentStatus.READY and (deployment.engine or {}).get("state") == "ready"


def model_list() -> list[dict]:
    """Each model once (its default or newest deployment's figures, a replica that answers first) with how many
    replicas answer (their engines loaded), then each
    deployment as `deployment-<id>`; then each on-call model nothing serves, with its state (loading or asleep):
    a request naming it wakes it."""
    usable = list(queueing.usable_deployments())
    # A replica counts as ready once its engine answers: one still loading is listed, but not as ready.
    answering = [deployment for deployment in usable if answers(deployment)]
    usable = answering + [deployment for deployment in usable if not answers(deployment)]
    replicas = Counter(name for deployment in answering for name in deployment.model_ids)
    on_call = {row.model.name: row for row in OnCall.objects.select_related("model")}
    seen, listed = set(), []
    for deployment in usable:
        for name in deployment.model_ids:
            if name not in seen:
                seen.add(name)
                listed.append({"id": name, "object": "model", "created": int(deployment.created.timestamp()),
                               "owned_by": "clusterpanel", "deployment": deployment.pk, "ctx": deployment.ctx,
                               "slots": deployment.slots, "replicas": replicas.get(name, 0),
                               "state": "ready" if answers(deployment) else "loading", "on_call": name in on_call})
    states = oncall.states([row.model for name, row in on_call.items() if name not in seen])
    for name, row in sorted(on_call.items()):
        if name not in seen:
            listed.append({"id": name, "object": "model", "created": int(row.created.timestamp()),
                           "owned_by": "clusterpanel", "deployment": None, "ctx": row.ctx, "slots": row.slots,
                           "replicas": 0, "state": states[row.model.pk], "on_call": True})
    return listed
