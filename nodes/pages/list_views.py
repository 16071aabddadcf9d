"""The Laptops page: every laptop in natural order (hid5-2 before hid5-10), and a selection of them to act on
at once: each chosen laptop's action followed live on the page (the API's selection stream,
static/js/laptops.js), and a summary when all have ended. Restart and remove ask first, naming what they end,
as they do for one laptop; without JavaScript it all still works, a reload at a time."""

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from clusterpanel.accounts.auth import lab_admin_required
from clusterpanel.kit import confirm
from clusterpanel.kit.idfields import plain_id
from clusterpanel.kit.natural import natural_key, natural_sorted
from nodes.actions import bulk
from nodes.laptops import refind
from nodes.metrics import store as metrics
from nodes.models import ActionKind, LanScan, Node, NodeAction

ASK_FIRST = {ActionKind.RESTART_RPC: "Restart", ActionKind.REMOVE: "Remove"}
BULK_KINDS = [(kind, ActionKind(kind).label + ("…" if kind in ASK_FIRST else "")) for kind in bulk.KINDS]


@lab_admin_required
def node_list(request: HttpRequest) -> HttpResponse:
    return laptops_page(request)


def laptops_page(request: HttpRequest, chosen: set[str] = frozenset(), status: int = 200, scan_range: str = ""
                 ) -> HttpResponse:
    """`chosen`: the laptops ticked (by name); by default, those of the selection followed."""
    nodes = natural_sorted(Node.objects.prefetch_related("rpc_servers", "probes", "link_checks"),
                           key=lambda node: node.name)
    for node in nodes:
        node.latest = (metrics.recent(node.pk, 1) or [None])[-1]
        node.flags = node.power_flags(node.latest)
    run = followed(request)
    if run and not chosen:
        chosen = {action.laptop_name for action in run["actions"]}
    scan = LanScan.objects.filter(pk=request.GET["scan"]).first() if plain_id(request.GET.get("scan", "")) else None
    return render(request, "nodes/list.html", {
        "nodes": nodes, "run": run, "chosen": chosen, "kinds": BULK_KINDS, "scan": scan,
        "scan_range": scan_range or getattr(scan, "addresses", "")}, status=status)


@lab_admin_required
@require_POST
def find_moved(request: HttpRequest) -> HttpResponse:
    """Look for laptops that came back at another address (nodes/laptops/refind.py), in the background."""
    text = request.POST.get("addresses", "")[:100]
    try:
        scan = refind.start(text, request.POST.get("public") == "1", request.user)
    except refind.RangeRefused as exc:
        messages.error(request, f"{exc} Nothing was scanned.")
        return laptops_page(request, status=400, scan_range=text)
    return redirect(f"{reverse('nodes:list')}?scan={scan.pk}")


@lab_admin_required
@require_POST
def act_on_laptops(request: HttpRequest) -> HttpResponse:
    kind, names = request.POST.get("action", ""), request.POST.getlist("node")
    wipe = kind == ActionKind.REMOVE and request.POST.get("wipe") == "1"
    try:
        if kind in ASK_FIRST and request.POST.get("confirmed") != "1":
            return ask(request, kind, names)
        actions = bulk.start(kind, names, request.user, wipe)
    except bulk.Refused as exc:
        messages.error(request, f"{exc} Nothing was started.")
        return laptops_page(request, chosen=set(names), status=400)
    return redirect(f"{reverse('nodes:list')}?actions={','.join(str(action.pk) for action in actions)}")


def ask(request: HttpRequest, kind: str, names: list[str]) -> HttpResponse:
    lines = bulk.consequences(kind, names)
    count = f"{len(names)} laptop{'s' if len(names) > 1 else ''}" if len(names) > 1 else names[0]
    question = (f"Remove {count}?" if kind == ActionKind.REMOVE else f"Restart the rpc-servers of {count}?")
    options = [("wipe", "Also delete the runtime and tensor caches the panel put on each laptop")] \
        if kind == ActionKind.REMOVE else []
    carry = [("action", kind), *[("node", name) for name in names], ("confirmed", "1")]
    return confirm.ask(request, question, lines, ASK_FIRST[kind], reverse("nodes:list"), options=options, carry=carry)


def followed(request: HttpRequest) -> dict | None:
    """The selection `?actions=4,5,6` names, to show on the page (followed live from there)."""
    ids = [part for part in request.GET.get("actions", "").split(",") if plain_id(part)][:1000]
    actions = sorted(NodeAction.objects.select_related("node").filter(pk__in=ids),
                     key=lambda action: natural_key(action.laptop_name))
    if not actions:
        return None
    kinds = {action.get_kind_display() for action in actions}
    return {"actions": actions, "ids": ",".join(str(action.pk) for action in actions),
            "title": f"{kinds.pop() if len(kinds) == 1 else 'Actions'} on {len(actions)} "
                     f"laptop{'s' if len(actions) > 1 else ''}",
            "summary": bulk.summary(actions), "ended": all(a.status in NodeAction.TERMINAL for a in actions)}
