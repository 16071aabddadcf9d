"""Helpers to reach simulated laptops through the panel's own SSH door."""

from pathlib import Path

from nodes import ssh
from nodes.simlan import Lan, Laptop


def target(lan: Lan, laptop: Laptop, host_key: str | None = None) -> ssh.SSHTarget:
    return ssh.SSHTarget(laptop.address, laptop.user, host_key or laptop.host_key,
                         private_key=Path(lan.key_path).read_text())
