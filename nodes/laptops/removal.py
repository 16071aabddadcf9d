"""Removing a laptop from the panel: refused while a deployment holds it or an action is under way on it;
otherwise its rpc-servers are stopped over SSH first (the supervisor forgets a laptop whose rows are gone, so
it would never stop them), and, if the admin asks, what the panel put on it is deleted too.

Only the folders the panel made under the install folder go (runtime, downloads, rpc, cache), never the
folder itself when anything else is in it: an install folder of `~` must not cost anyone their home.
"""

from dataclasses import dataclass, field

from django.db import transaction
from django.template.defaultfilters import pluralize

from nodes.laptops import holds
from nodes.models import ActionStatus, Node, NodeAction, RpcServer
from nodes.remote import ssh
from nodes.servers import rpcserver

WIPE = ('[ -d "$1" ] || exit 0; rm -rf -- "$1/runtime" "$1/downloads" "$1/rpc" "$1/cache"; '
        'rmdir -- "$1" 2>/dev/null; exit 0')


class Refused(ValueError):
    pass


@dataclass
class Removed:
    stopped: list[int] = field(default_factory=list)
    unreachable: str = ""  # why the laptop could not be reached: its servers may still run
    wiped: bool = False
    not_wiped: str = ""  # why its files were left although asked

    def summary(self, name: str) -> str:
        said = [f"{name} removed."]
        if self.stopped:
            said.append(f"Stopped its rpc-server{pluralize(len(self.stopped))} on port "
                        f"{', '.join(map(str, self.stopped))}.")
        if self.wiped:
            said.append("Its runtime and caches were deleted from the laptop.")
        if self.not_wiped:
            said.append(f"Its files were left: {self.not_wiped}.")
        if self.unreachable:
            said.append(f"The laptop could not be reached ({self.unreachable}): anything the panel started there "
                        "may still run, and its files stay.")
        return " ".join(said)


def holders(node: Node) -> list[holds.Holder]:
    return holds.holders(node)


def deployments_used(nodes: list[Node]) -> int:
    """How many deployments (any state) used any of `nodes`: removing them removes those too."""
    return holds.used_by(nodes)


def removal(node: Node, acting: NodeAction | None = None) -> list[str]:
    """What removing `node` ends, in words; Refused while a deployment holds it, or while an action other than
    `acting` (the removal itself, when run as an action) is under way on it."""
    held = holders(node)
    if held:
        names = ", ".join(map(str, held))
        raise Refused(f"{node.name} holds layers of {names}: stop that deployment first.")
    busy = node.actions.filter(status__in=(ActionStatus.QUEUED, ActionStatus.RUNNING)).exclude(
        pk=getattr(acting, "pk", None)).first()
    if busy:
        doing = f"{busy.get_kind_display().lower()} is {busy.get_status_display().lower()}"
        raise Refused(f"{node.name} is busy ({doing}); wait for it to end, then remove the laptop.")
    servers = [server.port for server in node.rpc_servers.all()]
    past = deployments_used([node])
    lines = [f"{node.name} leaves the panel, with its probes, metrics and history."]
    if servers:
        lines.append(f"Its rpc-server{pluralize(len(servers))} on port {', '.join(map(str, servers))} "
                     f"{pluralize(len(servers), 'is,are')} stopped on the laptop first.")
    if past:
        lines.append(f"{past} stopped or failed deployment{pluralize(past)} that used it "
                     f"{pluralize(past, 'is,are')} removed too; their jobs and batches stay.")
    return lines


def remove(node: Node, wipe: bool, acting: NodeAction | None = None) -> Removed:
    removal(node, acting)  # refused before anything is touched
    done = Removed()
    RpcServer.objects.filter(node=node).update(wanted=False)  # the supervisor starts nothing again meanwhile
    target = node.ssh_target()
    try:
        for server in node.rpc_servers.all():
            rpcserver.stop(target, node.install_dir, server.port)
            done.stopped.append(server.port)
        if wipe and node.install_dir.rstrip("/") == "~":
            done.not_wiped = ("its install folder is the user's home, where names like downloads or cache may "
                              "be theirs: delete the panel's runtime, rpc and cache folders there by hand")
        elif wipe:
            result = ssh.sh(target, WIPE, ssh.remote_path(node.install_dir))
            done.wiped = result.exit_status == 0
    except ssh.SSHError as exc:
        done.unreachable = str(exc)
    finally:
        ssh.forget(target)
    with transaction.atomic():
        locked = Node.objects.select_for_update().filter(pk=node.pk).first()
        if locked is not None:
            removal(locked, acting)  # a deployment may have taken it while the laptop was being cleaned
            holds.forget_used([locked])
            locked.delete()
    return done
