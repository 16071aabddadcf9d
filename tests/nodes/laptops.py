"""Helpers to reach simulated laptops through the panel's own SSH door."""

from pathlib import Path

from nodes.remote import ssh
from nodes.simlan.lan import Lan, Laptop


def target(lan: Lan, laptop: Laptop, host_key: str | None = None) -> ssh.SSHTarget:
    return ssh.SSHTarget(laptop.address, laptop.user, host_key or laptop.host_key,
                         private_key=Path(lan.key_path).read_text())


def register(lan: Lan, laptop: Laptop, name: str | None = None):
    """A Node for a simulated laptop, logging in with the LAN's key (the database must be open)."""
    from nodes.models import Node

    return Node.objects.create(name=name or laptop.name, host=laptop.address, username=laptop.user,
                               host_key=laptop.host_key, private_key=Path(lan.key_path).read_text())


def run_now(node, kind: str):
    """Run one action in this process, as a worker would, and return it finished."""
    from nodes.models import NodeAction
    from nodes.tasks import run_action

    action = NodeAction.objects.create(node=node, kind=kind)
    run_action(action.pk)
    action.refresh_from_db()
    return action


def register_all(lan: Lan, then: str) -> list:
    """A Node for every laptop of the LAN, each having run action `then` successfully."""
    made = [register(lan, laptop) for laptop in lan.laptops]
    for node in made:
        action = run_now(node, then)
        assert action.status == "succeeded", action.error
    return made


def set_link(lan: Lan, laptop_index: int, state: str) -> None:
    """Plug (`up`) or unplug (`down`) a laptop's cable: its link on the LAN's bridge (nodes/simlan/lan.py names it)."""
    import subprocess

    subprocess.run(["ip", "link", "set", f"cpv-{lan.name}{laptop_index}", state], check=True)
