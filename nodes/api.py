"""/api/nodes/: the laptops (lab admins only)."""

from typing import Any

from django.http import HttpRequest
from ninja import Query, Router, Schema

from clusterpanel.apikit import DEFAULT_LIMIT, MAX_LIMIT, Page, admin_only, errors, paged
from nodes import metrics
from nodes.models import Node

router = Router()


class NodeOut(Schema):
    name: str
    host: str
    status: str
    status_detail: str
    usable_memory: int | None
    last_seen: str | None
    metrics: dict[str, Any] | None


def node_summary(node: Node) -> dict:
    latest = (metrics.recent(node.pk, 1) or [None])[-1]
    return {"name": node.name, "host": node.host, "status": node.status, "status_detail": node.status_detail,
            "usable_memory": node.usable_bytes(), "last_seen": node.last_seen and node.last_seen.isoformat(),
            "metrics": latest}


@router.get("/", response={200: Page[NodeOut], **errors(403)}, summary="List the laptops")
def list_nodes(request: HttpRequest, limit: int = Query(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT),
               offset: int = Query(0, ge=0, le=2**31)):
    admin_only(request, "list the laptops")
    return paged(request, Node.objects.order_by("name"), node_summary, limit, offset)
