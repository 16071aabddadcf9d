"""Changing a laptop once added.

Changing where or how the panel reaches it (address, port, user, connection, install folder) is refused
while a deployment holds it, but for a new address (or port) that presents the pinned host key: that is the
same laptop, moved (DHCP gave it another address), and it is followed there as a scan would (nodes/laptops/refind.py):
its servers restart there and the deployments holding it recover as after a laptop drops. A new address with
another key leaves the laptop waiting for an admin to approve the key, as when a key changes by itself.
Removing one: nodes/laptops/removal.py.
"""

from django.db import transaction

from nodes.laptops import holds
from nodes.laptops.refind import follow_move
from nodes.laptops.removal import Refused, holders
from nodes.models import ActionKind, Node, NodeStatus
from nodes.remote import ssh
from nodes.tasks import enqueue

REACH = ("host", "port", "username", "connection", "install_dir")


def change(form, user) -> str:
    """Save a valid EditNodeForm; what happened, in words. Refused (nothing saved) if a holding deployment
    would lose the laptop; SSHError (nothing saved) if a new address cannot be reached."""
    before = Node.objects.get(pk=form.instance.pk)
    changed = [name for name in REACH if getattr(before, name) != form.cleaned_data[name]]
    held = holders(before) if changed else []
    presented = None
    if "host" in changed or "port" in changed:
        key = presented_key(form, before, held, changed)
        presented = key if key != before.host_key else None
    moved = bool(changed) and set(changed) <= {"host", "port"} and presented is None
    if held and not moved:
        raise refusal(form, before, held, changed)
    follows = []
    with transaction.atomic():
        node = form.save()
        if "install_dir" in changed:
            node.runtime = ""
            node.save(update_fields=["runtime"])
        if presented:
            node.refuse_host_key(presented)
        elif "host" in changed or "port" in changed:
            follow_move(node, f"It answers at {node.host}:{node.port} with its pinned host key; probing it there.",
                        user)
            follows = holds.moved(node, before.host)
        elif changed:
            node.set_status(NodeStatus.NEW, "Its connection changed; probing it again.")
            enqueue(node, ActionKind.PROBE, user)
        if "connection" in changed or "install_dir" in changed:
            node.rpc_servers.filter(wanted=True).update(restart_requested=True)
    ssh.forget(before.ssh_target())
    if presented:
        return (f"{node.name} saved, but {node.host}:{node.port} presents another host key than the one pinned: "
                "compare it below and approve it if it is the laptop's.")
    if moved:
        return " ".join([f"{node.name} saved: it answers at {node.host}:{node.port} with its pinned host key, so it "
                         "is the same laptop, moved. Probing it there; its rpc-servers restart there.",
                         *(f"{line[:1].upper()}{line[1:]}." for line in follows)])
    return f"{node.name} saved." + (" Probing it at its new settings." if changed else "")


def presented_key(form, before: Node, held: list, changed: list[str]) -> str:
    """The key the new address presents; while a deployment holds the laptop, one that cannot be read is a
    refusal in the holder's words (nothing is saved either way)."""
    try:
        return ssh.host_key_of(form.cleaned_data["host"], form.cleaned_data["port"], prefer=before.host_key.split()[0])
    except ssh.SSHError as exc:
        if held:
            raise refusal(form, before, held, changed, f" ({exc})") from None
        raise


def refusal(form, before: Node, held: list, changed: list[str], why: str = "") -> Refused:
    what = ", ".join(form.fields[name].label.lower() for name in changed)
    moving = set(changed) <= {"host", "port"}
    return Refused(f"{before.name} holds layers of {held[0].name}: stop that deployment before changing its {what}"
                   + (", or give an address where this laptop answers with its pinned host key" if moving else "")
                   + f".{why}")
