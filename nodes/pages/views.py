from datetime import UTC, datetime

from django.conf import settings
from django.contrib import messages
from django.core import signing
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.debug import sensitive_post_parameters, sensitive_variables
from django.views.decorators.http import require_http_methods, require_POST

from clusterpanel.accounts.auth import lab_admin_required
from clusterpanel.kit import confirm
from clusterpanel.kit.natural import natural_sorted
from nodes.laptops import changes as upkeep
from nodes.laptops import removal
from nodes.laptops.registration import RegistrationError, register
from nodes.metrics import store as metrics
from nodes.models import ActionKind, Node, NodeAction, NodeStatus, PanelKey, RpcServer
from nodes.pages.forms import AddNodeForm, ConfirmNodeForm, EditNodeForm, sign_host_key
from nodes.probing import devices
from nodes.probing.doctor import diagnose
from nodes.remote import ssh
from nodes.runtime import build_here
from nodes.runtime.bundle import RuntimeNotFound, find_bundle
from nodes.servers import rpcserver, serving
from nodes.tasks import enqueue

APPROVAL_SALT = "clusterpanel.nodes.approve-host-key"
USER_ACTIONS = [ActionKind.PROBE, ActionKind.INSTALL_RUNTIME, ActionKind.BUILD_RUNTIME, ActionKind.NETWORK_CHECK,
                ActionKind.MEASURE_SPEED]
ALLOWED = [*USER_ACTIONS, ActionKind.CLEAN_CACHE]  # cleaning has its button on the cache's card
ASKED_FIRST = {ActionKind.BUILD_RUNTIME}  # what takes the laptop's every core for minutes says so first
SEVERITY = {"error": 0, "warn": 1, "ok": 2}


@sensitive_post_parameters("password", "private_key")  # kept off DEBUG error pages
@lab_admin_required
def node_add(request: HttpRequest) -> HttpResponse:
    if request.method == "POST" and "signed_host_key" in request.POST:
        return confirm_node(request)
    form = AddNodeForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            host_key = ssh.host_key_of(data["host"], data["port"])
        except ssh.SSHError as exc:
            form.add_error("host", str(exc))
        else:
            confirm = ConfirmNodeForm(initial={**data, "signed_host_key": sign_host_key(host_key)})
            return render(request, "nodes/confirm.html", confirm_context(confirm, data["auth"], host_key))
    return render(request, "nodes/add.html", {"form": form, "panel_key": PanelKey.get().public_key})


def confirm_context(form: ConfirmNodeForm, auth: str, host_key: str) -> dict:
    return {"form": form, "auth": auth, "fingerprint": ssh.fingerprint(host_key),
            "panel_key": PanelKey.get().public_key}


@sensitive_variables("data")
def confirm_node(request: HttpRequest) -> HttpResponse:
    form = ConfirmNodeForm(request.POST)
    if not form.is_valid():
        key = form.cleaned_data.get("signed_host_key", "")
        if not key:
            messages.error(request, "The confirmation expired or was altered; start again.")
            return redirect("nodes:add")
        return render(request, "nodes/confirm.html", confirm_context(form, request.POST.get("auth", ""), key))
    data = form.cleaned_data
    node = form.save(commit=False)
    node.host_key = data["signed_host_key"]
    node.private_key = data["private_key"] if data["auth"] == "private_key" else ""
    try:
        register(node, password=data["password"] if data["auth"] == "password" else None)
    except RegistrationError as exc:
        form.add_error(None, f"{node.name} was not added: {exc}")
        return render(request, "nodes/confirm.html", confirm_context(form, data["auth"], data["signed_host_key"]))
    messages.success(request, f"{node.name} added; the panel is probing it now.")
    return redirect("nodes:detail", name=node.name)


@lab_admin_required
def node_detail(request: HttpRequest, name: str) -> HttpResponse:
    node = get_object_or_404(Node, name=name)
    return render(request, "nodes/detail.html", {
        "node": node, "facts": getattr(node.probes.first(), "facts", None),
        "actions": node.actions.all()[:10], "servers": node.rpc_servers.all(),
        "kinds": USER_ACTIONS, "link": node.link_checks.first(),
        "devices": devices.rows(node), "gpu_unused": devices.idle_gpu(node),
        "flags": node.power_flags(metrics.fresh(node.pk)), "cache": cache_shown(node),
        "cache_percent": settings.CACHE_CAP_PERCENT,
    })


def cache_shown(node: Node) -> dict:
    """The cache as last listed, its moments as datetimes for the page."""
    state = dict(node.cache_state)
    for key in ("checked", "failed_at"):
        state[key] = datetime.fromisoformat(state[key]) if state.get(key) else None
    state["models"] = [{**row, "used": datetime.fromtimestamp(row["used"], UTC) if row["used"] else None}
                       for row in state.get("models", [])]
    return state


@lab_admin_required
def edit_node(request: HttpRequest, name: str) -> HttpResponse:
    node = get_object_or_404(Node, name=name)
    form = EditNodeForm(request.POST or None, instance=node)
    if request.method == "POST" and form.is_valid():
        try:
            said = upkeep.change(form, request.user)
        except upkeep.Refused as exc:
            form.add_error(None, str(exc))
        except ssh.SSHError as exc:
            form.add_error("host", f"Nothing was saved: {exc}")
        else:
            messages.success(request, said)
            return redirect("nodes:detail", name=form.instance.name)
    shown = Node.objects.get(pk=node.pk)  # the saved laptop, not the form's unsaved changes
    return render(request, "nodes/edit.html", {"form": form, "node": shown}, status=400 if form.errors else 200)


@lab_admin_required
@require_http_methods(["GET", "POST"])
def remove_node(request: HttpRequest, name: str) -> HttpResponse:
    node = get_object_or_404(Node, name=name)
    question, back = f"Remove {node.name}?", reverse("nodes:detail", args=[name])
    try:
        consequences = removal.removal(node)
        if request.method == "POST":
            removed = removal.remove(node, wipe=request.POST.get("wipe") == "1")
    except removal.Refused as exc:
        return confirm.refuse(request, question, str(exc), back)
    if request.method == "GET":
        return confirm.ask(request, question, consequences, "Remove", back, options=[
            ("wipe", f"Also delete the runtime and tensor caches the panel put in {node.install_dir} on the laptop")])
    (messages.warning if removed.unreachable or removed.not_wiped else messages.success)(request, removed.summary(name))
    return redirect("nodes:list")


@lab_admin_required
@require_POST
def node_action(request: HttpRequest, name: str, kind: str) -> HttpResponse:
    node = get_object_or_404(Node, name=name)
    if kind not in ALLOWED:
        messages.error(request, "That is not something the panel can do to a laptop.")
    elif kind in ASKED_FIRST and request.POST.get("confirmed") != "1":
        return confirm.ask(request, f"Build the runtime on {node.name}?", build_here.consequences(node.install_dir),
                           "Build", reverse("nodes:detail", args=[name]), carry=[("confirmed", "1")])
    else:
        enqueue(node, kind, request.user)
    return redirect("nodes:detail", name=name)


@lab_admin_required
def build_log(request: HttpRequest, name: str, pk: int) -> HttpResponse:
    """A build's whole log, read from the laptop now; the lines its action kept when the laptop cannot be asked."""
    action = get_object_or_404(NodeAction.objects.select_related("node"), node__name=name, pk=pk,
                               kind=ActionKind.BUILD_RUNTIME)
    path, text, error = action.progress.get("log", ""), "", ""
    try:
        text = build_here.read_log(action.node.ssh_target(), path) if path else ""
    except ssh.SSHError as exc:
        error = str(exc)
    return render(request, "nodes/build_log.html", {"action": action, "path": path, "error": error,
                                                    "text": text or action.error or "(empty)"})


@lab_admin_required
@require_http_methods(["GET", "POST"])
def approve_host_key(request: HttpRequest, name: str) -> HttpResponse:
    """GET asks the laptop for its key now and shows it beside the pinned one; POST approves exactly the key
    that page showed (signed into it), never one stored earlier, which may be stale or another's."""
    node = get_object_or_404(Node, name=name, status=NodeStatus.HOST_KEY_CHANGED)
    if request.method == "POST":
        try:
            shown = signing.loads(request.POST.get("signed_host_key", ""), salt=APPROVAL_SALT, max_age=900)
        except signing.BadSignature:
            messages.error(request, "That approval expired or was altered; compare the keys again.")
            return redirect("nodes:approve-host-key", name=name)
        if shown["node"] != node.pk or shown["pinned"] != node.host_key:
            messages.error(request, "The laptop's keys changed since that page was shown; compare them again.")
            return redirect("nodes:approve-host-key", name=name)
        node.approve_host_key(shown["key"])
        messages.success(request, f"New host key of {node.name} approved: {node.host_key_fingerprint}.")
        enqueue(node, ActionKind.PROBE, request.user)
        return redirect("nodes:detail", name=name)
    try:
        presented, error = ssh.host_key_of(node.host, node.port), ""
    except ssh.SSHError as exc:
        presented, error = "", str(exc)
    if presented == node.host_key:
        node.approve_host_key(presented)  # it shows the pinned key again: nothing to approve
        messages.success(request, f"{node.name} presents its pinned key again; probing it.")
        enqueue(node, ActionKind.PROBE, request.user)
        return redirect("nodes:detail", name=name)
    signed = signing.dumps({"node": node.pk, "pinned": node.host_key, "key": presented}, salt=APPROVAL_SALT)
    return render(request, "nodes/host_key.html", {
        "node": node, "error": error, "presented_fingerprint": ssh.fingerprint(presented) if presented else "",
        "signed": signed})


@lab_admin_required
@require_POST
def rpc_server(request: HttpRequest, name: str) -> HttpResponse:
    node = get_object_or_404(Node, name=name)
    raw = request.POST.get("port", "50052")
    port = int(raw) if whole_number(raw) else 0
    state = request.POST.get("state") or "stop"
    try:
        serving.check_port(port)
    except serving.ServingError as exc:
        messages.error(request, str(exc))
        return redirect("nodes:detail", name=name)
    if state in ("stop", "restart") and request.POST.get("confirmed") != "1":
        return confirm.ask(request, f"{state.capitalize()} the rpc-server on {node.name}:{port}?",
                           serving.consequences(node, port, state), state.capitalize(),
                           reverse("nodes:detail", args=[name]),
                           carry=[("port", str(port)), ("state", state), ("confirmed", "1")])
    try:
        serving.want(node, port, state)
    except serving.ServingError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"rpc-server on port {port} will {state} within seconds.")
    return redirect("nodes:detail", name=name)


@lab_admin_required
def recent_metrics(request: HttpRequest) -> JsonResponse:
    """The last minutes of samples for every laptop (or one: ?node=ID), to draw charts before live data."""
    seconds, node = request.GET.get("seconds", "600"), request.GET.get("node", "")
    if not whole_number(seconds):
        return JsonResponse({"error": "seconds must be a whole number.", "field": "seconds"}, status=400)
    if node and not whole_number(node):
        return JsonResponse({"error": "node must be a laptop's id (a whole number).", "field": "node"}, status=400)
    seconds = max(10, min(int(seconds), metrics.WINDOW_S))
    nodes = natural_sorted(Node.objects.filter(pk=int(node)) if node else Node.objects.all(), key=lambda n: n.name)
    return JsonResponse({"nodes": [
        {"id": node.pk, "name": node.name, "status": node.status, "samples": metrics.recent(node.pk, seconds)}
        for node in nodes
    ]})


def whole_number(text: str) -> bool:
    """ASCII digits only, and few enough for a database id: str.isdigit() also takes "²", which int() refuses,
    and SQLite refuses an integer past 2**63."""
    return text.isascii() and text.isdigit() and len(text) <= 18


def current_bundle():
    try:
        return find_bundle()
    except RuntimeNotFound:
        return None


@lab_admin_required
def doctor(request: HttpRequest, name: str | None = None) -> HttpResponse:
    """Each laptop's findings (or one laptop's), worst first."""
    bundle = current_bundle()
    nodes = natural_sorted(Node.objects.filter(name=name) if name else Node.objects.all(), key=lambda n: n.name)
    if name and not nodes:
        return redirect("nodes:list")
    reports = [(node, sorted(diagnose(node, bundle), key=lambda f: SEVERITY[f.level])) for node in nodes]
    return render(request, "nodes/doctor.html", {"reports": reports, "single": bool(name)})


@lab_admin_required
@require_POST
def check_again(request: HttpRequest) -> HttpResponse:
    for node in Node.objects.exclude(status=NodeStatus.HOST_KEY_CHANGED):
        enqueue(node, ActionKind.PROBE, request.user)
        enqueue(node, ActionKind.NETWORK_CHECK, request.user)
    messages.success(request, "Probing every laptop and measuring its network; refresh in a few seconds.")
    return redirect("nodes:doctor")


@lab_admin_required
def rpc_server_log(request: HttpRequest, name: str, port: int) -> HttpResponse:
    """The tail of a server's log, read from the laptop now."""
    server = get_object_or_404(RpcServer.objects.select_related("node"), node__name=name, port=port)
    try:
        state = rpcserver.state(server.node.ssh_target(), server.node.install_dir, port, log_lines=200)
        text, error = state.log_tail or "(empty)", ""
    except ssh.SSHError as exc:
        text, error = "", str(exc)
    return render(request, "nodes/log.html", {"server": server, "text": text, "error": error})
