"""Acting on many laptops at once (probe, install the runtime, restart rpc-servers, remove): one NodeAction per
laptop, all started or none (a request that names a laptop twice, one that does not exist, or one already busy
starts nothing), and what they came to in one sentence ("12 probed; 2 unreachable: hid5-3, hid5-7.").

Each laptop follows the rules of its single action: a removal is refused while a deployment holds the laptop;
a restart is not (the page asks first, naming what it ends, as it does for one server)."""

from collections.abc import Iterable

from django.db import transaction
from django.template.defaultfilters import pluralize

from clusterpanel.accounts.models import User
from clusterpanel.kit.natural import natural_sorted
from nodes.laptops import removal
from nodes.models import ActionKind, ActionStatus, Node, NodeAction
from nodes.servers import serving
from nodes.tasks import enqueue_many

KINDS = (ActionKind.PROBE, ActionKind.INSTALL_RUNTIME, ActionKind.RESTART_RPC, ActionKind.REMOVE)
DONE = {ActionKind.PROBE: "{} probed", ActionKind.INSTALL_RUNTIME: "runtime installed on {}",
        ActionKind.RESTART_RPC: "rpc-servers restarted on {}", ActionKind.REMOVE: "{} removed"}
UNDER_WAY = (ActionStatus.QUEUED, ActionStatus.RUNNING)
MOST_NAMED = 12  # a sentence names this many laptops, then counts the rest


class Refused(ValueError):
    def __init__(self, message: str, field: str | None = "nodes") -> None:
        super().__init__(message)
        self.field = field


def listed(names: Iterable[str]) -> str:
    """Names in natural order, the first MOST_NAMED of them: "hid5-2, hid5-10 and 3 more"."""
    names = natural_sorted(names)
    shown = ", ".join(names[:MOST_NAMED])
    return f"{shown} and {len(names) - MOST_NAMED} more" if len(names) > MOST_NAMED else shown


def chosen(names: list[str]) -> list[Node]:
    """The laptops named, in natural order; Refused (saying which) for an empty list, a name given twice or a
    name no laptop has."""
    if not names:
        raise Refused("Choose at least one laptop.")
    twice = {name for name in names if names.count(name) > 1}
    if twice:
        raise Refused(f"{listed(twice)} {pluralize(len(twice), 'is,are')} named more than once: name each laptop "
                      "once.")
    found = {node.name: node for node in Node.objects.filter(name__in=names)}
    unknown = [name for name in names if name not in found]
    if unknown:
        raise Refused(f"No laptop is named {listed(unknown)}.")
    return natural_sorted(found.values(), key=lambda node: node.name)


def check_kind(kind: str, wipe: bool) -> None:
    if kind not in KINDS:
        raise Refused(f"{kind or 'Nothing'} is not something the panel does to many laptops at once: choose "
                      f"{', '.join(KINDS[:-1])} or {KINDS[-1]}.", "action")
    if wipe and kind != ActionKind.REMOVE:
        raise Refused("wipe goes with remove only.", "wipe")


def refusals(kind: str, nodes: list[Node]) -> list[str]:
    """Why these laptops cannot all take `kind` now: each one busy, and for a removal each one a deployment
    holds."""
    busy = NodeAction.objects.filter(node__in=nodes, status__in=UNDER_WAY).select_related("node")
    doing = {action.node.name: f"{action.get_kind_display().lower()} {action.get_status_display().lower()}"
             for action in busy}
    said = [f"{name} is busy ({doing[name]})" for name in natural_sorted(doing)]
    if said:
        said = [f"{'; '.join(said)}: wait for {pluralize(len(said), 'it,them')} to end."]
    if kind == ActionKind.REMOVE:
        for node in nodes:
            if node.name not in doing and removal.holders(node):
                try:
                    removal.removal(node)
                except removal.Refused as exc:
                    said.append(str(exc))
    return said


def start(kind: str, names: list[str], user: User | None, wipe: bool = False) -> list[NodeAction]:
    """One `kind` action per named laptop, queued together (sent to a worker once committed, which runs them
    side by side), in natural order of their laptops; Refused, with nothing started, when any cannot take it."""
    check_kind(kind, wipe)
    with transaction.atomic():
        nodes = chosen(names)
        list(Node.objects.select_for_update().filter(pk__in=[node.pk for node in nodes]))  # one request at a time
        why = refusals(kind, nodes)
        if why:
            raise Refused(" ".join(why))
        return enqueue_many(nodes, kind, user, {"wipe": True} if wipe else None)


def consequences(kind: str, names: list[str]) -> list[str]:
    """What the page says before a restart or a removal of these laptops; Refused as `start` would be."""
    check_kind(kind, False)
    nodes = chosen(names)
    why = refusals(kind, nodes)
    if why:
        raise Refused(" ".join(why))
    return removal_consequences(nodes) if kind == ActionKind.REMOVE else restart_consequences(nodes)


def ports_of(node: Node, wanted_only: bool = False) -> list[int]:
    servers = node.rpc_servers.filter(wanted=True) if wanted_only else node.rpc_servers.all()
    return sorted(server.port for server in servers)


def removal_consequences(nodes: list[Node]) -> list[str]:
    many = len(nodes) > 1
    lines = [f"{listed(node.name for node in nodes)} {'leave' if many else 'leaves'} the panel, with "
             f"{'their' if many else 'its'} probes, metrics and history."]
    serving_ones = [f"{node.name} (port {', '.join(map(str, ports))})" for node in nodes if (ports := ports_of(node))]
    if serving_ones:
        lines.append(f"rpc-servers are stopped on the laptop first: {', '.join(serving_ones)}.")
    past = removal.deployments_used(nodes)
    if past:
        lines.append(f"{past} stopped or failed deployment{pluralize(past)} that used them "
                     f"{pluralize(past, 'is,are')} removed too; their jobs and batches stay.")
    lines.append("A laptop that cannot be reached is removed all the same: what the panel started on it may "
                 "still run there.")
    return lines


def restart_consequences(nodes: list[Node]) -> list[str]:
    lines, quiet, idle = [], [], []
    for node in nodes:
        ports = ports_of(node, wanted_only=True)
        if not ports:
            idle.append(node.name)
        for port in ports:
            said = serving.consequences(node, port, "restart")
            if said[0].startswith("No running deployment"):
                quiet.append(f"{node.name}:{port}")
            else:
                lines.append(f"{node.name}:{port}: {' '.join(said)}")
    if quiet:
        they = pluralize(len(quiet), "it restarts,they restart")
        lines.insert(0, f"No running deployment uses {', '.join(quiet)}: {they} within seconds.")
    if idle:
        lines.append(f"{listed(idle)} {pluralize(len(idle), 'has,have')} no rpc-server running: nothing to restart "
                     "there.")
    return lines


def summary(actions: list[NodeAction]) -> str:
    """What the actions came to, each kind in a sentence; while some run, how many have ended."""
    ended = [action for action in actions if action.status in NodeAction.TERMINAL]
    if len(ended) < len(actions):
        return f"{len(ended)} of {len(actions)} ended."
    kinds = sorted({action.kind for action in actions}, key=lambda kind: list(ActionKind.values).index(kind))
    return " ".join(said(kind, [action for action in actions if action.kind == kind]) for kind in kinds)


def said(kind: str, actions: list[NodeAction]) -> str:
    names = {"unreachable": [], "failed": [], "idle": [], "done": []}
    for action in actions:
        unreachable = action.progress.get("unreachable")
        if action.status == ActionStatus.FAILED:
            names["unreachable" if unreachable else "failed"].append(action.laptop_name)
        elif kind == ActionKind.RESTART_RPC and action.progress.get("ports") == []:
            names["idle"].append(action.laptop_name)
        else:
            names["done"].append(action.laptop_name)
            if kind == ActionKind.REMOVE and unreachable:
                names["unreachable"].append(action.laptop_name)
    parts = [DONE.get(kind, kind.replace("_", " ") + " done on {}").format(len(names["done"]))]
    if names["idle"]:
        parts.append(f"{len(names['idle'])} had none to restart: {listed(names['idle'])}")
    if names["unreachable"]:
        them = " of them could not be reached, so what the panel started there may still run" \
            if kind == ActionKind.REMOVE else " unreachable"
        parts.append(f"{len(names['unreachable'])}{them}: {listed(names['unreachable'])}")
    if names["failed"]:
        parts.append(f"{len(names['failed'])} failed: {listed(names['failed'])}")
    sentence = "; ".join(parts) + "."
    return sentence[:1].upper() + sentence[1:]
