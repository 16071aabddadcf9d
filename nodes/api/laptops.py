"""/api/nodes/: the laptops, for lab admins: register one (its host key confirmed in a second call, as in the
browser), read, change and remove them. Their actions, servers and metrics: nodes/api/actions.py."""

from datetime import datetime
from typing import Any, Literal

from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from django.views.decorators.debug import sensitive_variables
from ninja import Field, Query, Router, Schema, Status

from clusterpanel.accounts.apiauth import admin_only
from clusterpanel.kit.apikit import ApiError, Input, Page, Paging, errors, form_refusal, paged
from clusterpanel.kit.natural import natural_sorted
from nodes.api.rows import action_row, server_row
from nodes.laptops import changes as upkeep
from nodes.laptops import removal
from nodes.laptops.registration import NotConfirmed, RegistrationError, confirmed_host_key, register
from nodes.metrics import store as metrics
from nodes.models import Node
from nodes.pages.forms import AddNodeForm, ConfirmNodeForm, EditNodeForm, sign_host_key
from nodes.probing import devices
from nodes.remote import ssh

router = Router()


class HostIn(Input):
    host: str = Field(max_length=255, description="Address or host name on the LAN.")
    port: int = Field(22, ge=1, le=65535)


class HostKeyOut(Schema):
    host: str
    port: int
    fingerprint: str = Field(description="Compare it with the laptop's own (`ssh-keygen -lf` there), then send "
                                         "it as host_key_fingerprint to register the laptop.")


class NodeIn(Input):
    name: str = Field(description="A short name, e.g. lab-3.")
    host: str
    port: int = 22
    username: str
    connection: Literal["tunnel", "direct"] = "tunnel"
    install_dir: str = "~/.clusterpanel"
    auth: Literal["password", "panel_key", "private_key"] = Field(description=(
        "password: used once to add the panel's key, then forgotten; panel_key: the panel's key is already in "
        "the laptop's authorized_keys; private_key: a key the laptop accepts, kept encrypted."))
    password: str | None = None
    private_key: str | None = None
    host_key_fingerprint: str = Field(description="The fingerprint POST /api/nodes/host-key/ showed, confirmed.")


class NodeChange(Input):
    name: str | None = None
    host: str | None = None
    port: int | None = None
    username: str | None = None
    connection: Literal["tunnel", "direct"] | None = None
    install_dir: str | None = None
    pipeline_order: int | None = None
    usable_gb: float | None = Field(None, description="null: measured (free memory minus the reserve).")
    reserve_gb: float | None = None
    devices_off: list[str] | None = Field(None, description="Device names kept out of plans, e.g. [\"Vulkan0\"].")
    cache_cap: str | None = Field(None, max_length=40, description=(
        "How much disk the rpc cache and downloads may take, with its unit: \"40 GiB\", \"500 GB\"; null or \"\": "
        "the default share of the room they could have (what they hold plus the free disk)."))


class NodeOut(Schema):
    name: str
    host: str
    port: int
    username: str
    connection: str
    install_dir: str
    status: str
    status_detail: str
    host_key_fingerprint: str
    runtime: str
    speed_gb_s: float | None
    usable_memory: int | None = Field(description="Bytes the planner may fill: set by hand, or measured.")
    memory_reserve: int
    usable_set_by_hand: bool
    pipeline_order: int
    cache_cap: int | None = Field(description="Bytes the rpc cache and downloads may take, set by hand; null: the "
                                              "default share of the disk.")
    last_seen: datetime | None
    metrics: dict[str, Any] | None = Field(description="The latest sample (CPU, memory, swap, network, temperature).")


class ServerOut(Schema):
    port: int
    wanted: bool
    status: str
    pid: int | None
    restarts: int
    last_death: str
    endpoint: str | None
    deployment: int | None
    devices: list[str] = Field(description="The laptop's devices it serves, in order: the head sees each as one.")


class ActionOut(Schema):
    id: int
    node: str
    kind: str
    status: str
    message: str
    error: str
    progress: dict[str, Any]
    created: datetime
    started: datetime | None
    finished: datetime | None
    url: str
    events: str = Field(description="Server-Sent Events of its progress until it ends.")


class DeviceOut(Schema):
    name: str = Field(description="ggml's name for it: CPU, Vulkan0, CUDA0, MTL0.")
    kind: str = Field(description="cpu, vulkan, cuda, metal, …")
    type: str = Field(description="cpu, gpu, igpu (its memory is the laptop's RAM), accel.")
    description: str
    total: int
    free: int
    host_memory: bool = Field(description="Its memory is the laptop's RAM (the CPU, an integrated GPU, a software "
                                          "renderer): the planner counts that RAM once.")
    speed_gb_s: float | None = Field(description="Effective bandwidth measured by Measure speed; null: not yet.")
    in_plans: bool = Field(description="False: an admin keeps it out of plans (devices_off).")


class NodeDetail(NodeOut):
    devices: list[DeviceOut] = Field(description="What the laptop's runtime can compute on, GPUs first.")
    gpu_unused: str = Field(description="Why a GPU the laptop has holds no layers, in words; empty if none is idle.")
    facts: dict[str, Any] | None = Field(description="The latest probe: CPU, cores, memory, OS, runtime.")
    probed: datetime | None
    link: dict[str, Any] | None = Field(description="The latest network check.")
    servers: list[ServerOut]
    actions: list[ActionOut] = Field(description="The ten latest.")
    cache: dict[str, Any] | None = Field(description=(
        "The rpc cache as last listed (after each deployment, every hour, and by the clean_cache action): bytes "
        "held (cache, downloads), files, cap, disk and free, what it holds per model (model null: files of no model "
        "in the library), what the last clean removed, and why it failed if it did (failed)."))


class Removal(Schema):
    removed: str
    summary: str
    stopped: list[int]
    wiped: bool
    not_wiped: str
    unreachable: str


def node_row(node: Node) -> dict:
    return {"name": node.name, "host": node.host, "port": node.port, "username": node.username,
            "connection": node.connection, "install_dir": node.install_dir, "status": node.status,
            "status_detail": node.status_detail, "host_key_fingerprint": node.host_key_fingerprint,
            "runtime": node.runtime, "speed_gb_s": node.speed_gb_s, "usable_memory": node.usable_bytes(),
            "memory_reserve": node.memory_reserve, "usable_set_by_hand": node.usable_memory is not None,
            "pipeline_order": node.pipeline_order, "cache_cap": node.cache_cap, "last_seen": node.last_seen,
            "metrics": metrics.fresh(node.pk)}


def node_detail(node: Node) -> dict:
    probe, link = node.probes.first(), node.link_checks.first()
    return {**node_row(node), "devices": devices.rows(node), "gpu_unused": devices.idle_gpu(node),
            "facts": probe and probe.facts, "probed": probe and probe.created,
            "link": link and {**link.report, "warnings": link.warnings, "checked": link.created.isoformat()},
            "servers": [server_row(server) for server in node.rpc_servers.select_related("stage")],
            "actions": [action_row(action) for action in node.actions.all()[:10]], "cache": node.cache_state or None}


class InNaturalOrder:
    """Laptops by name as people count them (hid5-2 before hid5-10), which SQL cannot sort, pageable as
    `paged` pages a queryset: a lab's few dozen are read at once."""

    def __init__(self, nodes) -> None:
        self.nodes = natural_sorted(nodes, key=lambda node: node.name)

    def count(self) -> int:
        return len(self.nodes)

    def __getitem__(self, window: slice) -> list[Node]:
        return self.nodes[window]


def laptop(request: HttpRequest, name: str) -> Node:
    admin_only(request, "manage laptops")
    return get_object_or_404(Node, name=name)


@router.get("/", response={200: Page[NodeOut], **errors(403)}, summary="List the laptops")
def list_nodes(request: HttpRequest, paging: Query[Paging]):
    admin_only(request, "list the laptops")
    return paged(request, InNaturalOrder(Node.objects.all()), node_row, paging)


@router.post("/host-key/", response={200: HostKeyOut, **errors(403)}, summary="Step 1: a laptop's host key")
def host_key(request: HttpRequest, payload: HostIn):
    admin_only(request, "add laptops")
    form = AddNodeForm({"name": "x", "host": payload.host, "port": payload.port, "username": "x",
                        "connection": "tunnel", "install_dir": "~/.clusterpanel", "auth": "panel_key"})
    if not form.is_valid():
        raise form_refusal(form)
    try:
        key = ssh.host_key_of(payload.host, payload.port)
    except ssh.SSHError as exc:
        raise ApiError(str(exc), 400, "host") from None
    return {"host": payload.host, "port": payload.port, "fingerprint": ssh.fingerprint(key)}


@router.post("/", response={201: NodeDetail, **errors(403, 409)}, summary="Step 2: register a laptop")
@sensitive_variables("payload", "data")
def register_node(request: HttpRequest, payload: NodeIn):
    user = admin_only(request, "add laptops")
    data = payload.model_dump()
    if not AddNodeForm(data).is_valid():
        raise form_refusal(AddNodeForm(data))
    try:
        key = confirmed_host_key(payload.host, payload.port, payload.host_key_fingerprint)
    except NotConfirmed as exc:
        raise ApiError(str(exc), 409, "host_key_fingerprint") from None
    except ssh.SSHError as exc:
        raise ApiError(str(exc), 400, "host") from None
    form = ConfirmNodeForm({**data, "password": payload.password or "", "private_key": payload.private_key or "",
                            "signed_host_key": sign_host_key(key)})
    if not form.is_valid():
        raise form_refusal(form)
    node = form.save(commit=False)
    node.host_key = key
    node.private_key = payload.private_key if payload.auth == "private_key" else ""
    try:
        register(node, password=payload.password if payload.auth == "password" else None, user=user)
    except RegistrationError as exc:
        raise ApiError(f"{node.name} was not added: {exc}", 400) from None
    return Status(201, node_detail(node))


@router.get("/{slug:name}/", response={200: NodeDetail, **errors(403, 404)}, summary="A laptop in full")
def get_node(request: HttpRequest, name: str):
    return node_detail(laptop(request, name))


@router.patch("/{slug:name}/", response={200: NodeDetail, **errors(403, 404, 409)}, summary="Change a laptop")
def change_node(request: HttpRequest, name: str, payload: NodeChange):
    node = laptop(request, name)
    form = EditNodeForm(instance=node)
    data = {field: form.initial.get(field) for field in form.fields}
    data = {key: "" if value is None else value for key, value in data.items()}
    data.update({key: "" if value is None else value for key, value in payload.model_dump(exclude_unset=True).items()})
    form = EditNodeForm(data, instance=node)
    if not form.is_valid():
        raise form_refusal(form)
    try:
        said = upkeep.change(form, request.auth)
    except upkeep.Refused as exc:
        raise ApiError(str(exc), 409) from None
    except ssh.SSHError as exc:
        raise ApiError(f"Nothing was saved: {exc}", 400, "host") from None
    node = Node.objects.get(pk=node.pk)
    return {**node_detail(node), "status_detail": node.status_detail or said}


@router.delete("/{slug:name}/", response={200: Removal, **errors(403, 404, 409)}, summary="Remove a laptop")
def remove_node(request: HttpRequest, name: str,
                wipe: bool = Query(False, description="Also delete the runtime and caches the panel put there.")):
    node = laptop(request, name)
    try:
        removal.removal(node)
        removed = removal.remove(node, wipe=wipe)
    except removal.Refused as exc:
        raise ApiError(str(exc), 409) from None
    return {"removed": name, "summary": removed.summary(name), "stopped": removed.stopped, "wiped": removed.wiped,
            "not_wiped": removed.not_wiped, "unreachable": removed.unreachable}
