"""Changing a laptop once added.

Changing where or how the panel reaches it (address, port, user, connection, install folder) is refused
while a deployment holds it; a new address must present the pinned host key, or the laptop waits for an
admin to approve the new one, as when a key changes by itself. Removing one: nodes/removal.py.
"""

from django.db import transaction

from nodes import ssh
from nodes.models import ActionKind, Node, NodeStatus
from nodes.removal import Refused, holders
from nodes.tasks import enqueue

REACH = ("host", "port", "username", "connection", "install_dir")


def change(form, user) -> str:
    """Save a valid EditNodeForm; what happened, in words. Refused (nothing saved) if a holding deployment
    would lose the laptop; SSHError (nothing saved) if a new address cannot be reached."""
    before = Node.objects.get(pk=form.instance.pk)
    changed = [name for name in REACH if getattr(before, name) != form.cleaned_data[name]]
    held = holders(before) if changed else []
    if held:
        raise Refused(f"{before.name} holds layers of {held[0].name}: stop that deployment "
                      f"before changing its {', '.join(form.fields[name].label.lower() for name in changed)}.")
    presented = None
    if "host" in changed or "port" in changed:
        key = ssh.host_key_of(form.cleaned_data["host"], form.cleaned_data["port"])
        presented = key if key != before.host_key else None
    with transaction.atomic():
        node = form.save()
        if "install_dir" in changed:
            node.runtime = ""
            node.save(update_fields=["runtime"])
        if presented:
            node.refuse_host_key(presented)
        elif changed:
            node.set_status(NodeStatus.NEW, "Its connection changed; probing it again.")
            enqueue(node, ActionKind.PROBE, user)
        if "connection" in changed or "install_dir" in changed:
            node.rpc_servers.filter(wanted=True).update(restart_requested=True)
    ssh.forget(before.ssh_target())
    if presented:
        return (f"{node.name} saved, but {node.host}:{node.port} presents another host key than the one pinned: "
                "compare it below and approve it if it is the laptop's.")
    return f"{node.name} saved." + (" Probing it at its new settings." if changed else "")
