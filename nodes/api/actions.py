"""/api/nodes/<name>/...: what a lab admin does to a laptop by script. Actions (probe, install the runtime,
build the runtime on the laptop, network check, measure speed, clean the rpc cache) answer at once with a status
URL and an event stream; rpc-servers are started, stopped and restarted by the supervisor within seconds;
metrics are the latest sample and the history."""

from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from asgiref.sync import sync_to_async
from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from django.utils import timezone
from ninja import Query, Router, Schema, Status

from clusterpanel.kit.apikit import (
    ApiError,
    Input,
    Page,
    Paging,
    described_as_events,
    errors,
    event_stream,
    existing,
    follow,
    paged,
)
from nodes.api.laptops import ActionOut, ServerOut, laptop
from nodes.api.rows import action_row, server_row
from nodes.metrics import store as metrics
from nodes.models import ActionStatus, MetricMinute, NodeAction, RpcServer
from nodes.remote import ssh
from nodes.servers import rpcserver, serving
from nodes.tasks import enqueue

router = Router()
ENDED = (ActionStatus.SUCCEEDED, ActionStatus.FAILED)
EPOCH = datetime(2000, 1, 1, tzinfo=UTC)  # before any sample; a date near year 1 overflows converting to UTC


class ActionIn(Input):
    kind: Literal["probe", "install_runtime", "build_runtime", "network_check", "measure_speed", "clean_cache"]


class ServerIn(Input):
    state: Literal["start", "stop", "restart"]


class ServerLog(Schema):
    port: int
    log: str


class History(Schema):
    node: str
    resolution: Literal["second", "minute"]
    samples: list[dict[str, Any]]


@router.post("/{slug:name}/actions/", response={202: ActionOut, **errors(403, 404)}, summary="Start an action")
def start_action(request: HttpRequest, name: str, payload: ActionIn):
    node = laptop(request, name)
    return Status(202, action_row(enqueue(node, payload.kind, request.auth)))


@router.get("/{slug:name}/actions/", response={200: Page[ActionOut], **errors(403, 404)},
            summary="A laptop's actions, newest first")
def list_actions(request: HttpRequest, name: str, paging: Query[Paging]):
    actions = laptop(request, name).actions.select_related("node").order_by("-created", "-pk")
    return paged(request, actions, action_row, paging)


def action_of(request: HttpRequest, name: str, pk: int) -> NodeAction:
    node = laptop(request, name)
    return get_object_or_404(NodeAction.objects.select_related("node"), node=node, pk=existing(pk, "action"))


@router.get("/{slug:name}/actions/{int:pk}/", response={200: ActionOut, **errors(403, 404)}, url_name="get_action",
            summary="An action's state")
def get_action(request: HttpRequest, name: str, pk: int):
    return action_row(action_of(request, name, pk))


@router.get("/{slug:name}/actions/{int:pk}/events/", response=errors(403, 404), url_name="follow_action",
            openapi_extra=described_as_events(ActionOut), summary="Follow an action live, until it ends")
async def follow_action(request: HttpRequest, name: str, pk: int):
    action = await sync_to_async(action_of)(request, name, pk)

    def snapshot() -> dict | None:
        found = NodeAction.objects.select_related("node").filter(pk=action.pk).first()
        return action_row(found) if found else None

    return event_stream(follow(snapshot, lambda state: state["status"] in ENDED))


@router.get("/{slug:name}/servers/", response={200: list[ServerOut], **errors(403, 404)},
            summary="A laptop's rpc-servers")
def list_servers(request: HttpRequest, name: str):
    return [server_row(server) for server in laptop(request, name).rpc_servers.select_related("stage", "node")]


@router.put("/{slug:name}/servers/{int:port}/", response={200: ServerOut, **errors(403, 404)},
            summary="Start, stop or restart an rpc-server (within seconds)")
def set_server(request: HttpRequest, name: str, port: int, payload: ServerIn):
    node = laptop(request, name)
    try:
        server = serving.want(node, port, payload.state)
    except serving.ServingError as exc:
        raise ApiError(str(exc), 400, "port") from None
    return server_row(RpcServer.objects.select_related("node", "stage").get(pk=server.pk))


@router.get("/{slug:name}/servers/{int:port}/log/", response={200: ServerLog, **errors(403, 404, 502)},
            summary="The tail of an rpc-server's log, read from the laptop now")
def server_log(request: HttpRequest, name: str, port: int,
               lines: int = Query(200, ge=1, le=2000, description="How many of its last lines.")):
    node = laptop(request, name)
    server = get_object_or_404(RpcServer, node=node, port=existing(port, "rpc-server port"))
    try:
        state = rpcserver.state(node.ssh_target(), node.install_dir, server.port, log_lines=lines)
    except ssh.SSHError as exc:
        raise ApiError(f"The laptop could not be asked: {exc}", 502) from None
    return {"port": server.port, "log": state.log_tail}


@router.get("/{slug:name}/metrics/latest/", response={200: dict[str, Any], **errors(403, 404)},
            summary="A laptop's latest sample (CPU, memory, swap, network, temperature)")
def latest_sample(request: HttpRequest, name: str):
    node = laptop(request, name)
    found = metrics.fresh(node.pk)
    if found is None:
        raise ApiError(f"No sample of {node.name} in the last minute: it is offline, or the metrics collector "
                       "is not running.", 404)
    return found


@router.get("/{slug:name}/metrics/", response={200: History, **errors(403, 404)},
            summary="A laptop's samples over a time range: per second within the last hour, per minute before")
def history(request: HttpRequest, name: str, since: datetime | None = Query(None, description="Default: an hour ago."),
            until: datetime | None = Query(None, description="Default: now.")):
    node = laptop(request, name)
    now = timezone.now()
    since, until = since or now - timedelta(hours=1), until or now
    if timezone.is_naive(since) or timezone.is_naive(until):
        raise ApiError("since and until need a time zone (e.g. 2026-11-30T12:00:00Z).", 400,
                       "since" if timezone.is_naive(since) else "until")
    if not (EPOCH <= since <= now + timedelta(days=1) and EPOCH <= until <= now + timedelta(days=1)):
        raise ApiError("since and until must lie between 2000 and tomorrow.", 400, "since")
    if since >= until or until - since > timedelta(days=metrics.HISTORY_DAYS):
        raise ApiError(f"since must come before until, at most {metrics.HISTORY_DAYS} days apart.", 400, "since")
    if since >= now - timedelta(seconds=metrics.WINDOW_S):
        start, end = since.timestamp(), until.timestamp()
        samples = [s for s in metrics.recent(node.pk, metrics.WINDOW_S) if start <= s["t"] <= end]
        return {"node": node.name, "resolution": "second", "samples": samples}
    rows = MetricMinute.objects.filter(node=node, minute__gte=since, minute__lte=until)
    return {"node": node.name, "resolution": "minute", "samples": [
        {"t": row.minute.timestamp(), "samples": row.samples, "cpu": row.cpu, "ram_used": row.ram_used,
         "ram_available": row.ram_available, "swap_used": row.swap_used, "rx": row.rx, "tx": row.tx}
        for row in rows]}

