"""What the deployments above a laptop make of it: which hold its layers, how many ever used it, what losing one
of its rpc-servers ends, what a move to a new address sets going, and which files of its rpc cache they need.

nodes/ describes machines and imports nothing that runs deployments. The apps that run them answer these
hooks when they start (models_app/apps.py, jobs/apps.py); until one has, no deployment
holds anything, and nothing follows a move.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from clusterpanel.kit.hooks import Hook

if TYPE_CHECKING:
    from nodes.models import Node, RpcServer


@dataclass(frozen=True)
class Holder:
    """A deployment holding a laptop's layers, in words: "standin #3", "ready"."""

    name: str
    state: str

    def __str__(self) -> str:
        return f"{self.name} ({self.state})"


class NotKnown(Exception):
    """What a deployment needs cannot be told (its model's file is gone and its hashes were never taken)."""


def not_asked_yet(node) -> set[str]:
    raise NotKnown("no app answers which files the deployments need (models_app is not loaded here)")


# The active deployments holding a laptop.
holders: Hook[[Node], list[Holder]] = Hook("holders", lambda node: [])
# How many deployments, in any state, used any of these laptops.
used_by: Hook[[list[Node]], int] = Hook("used_by", lambda nodes: 0)
# Delete the deployments that used these laptops (inactive: checked before).
forget_used: Hook[[list[Node]], None] = Hook("forget_used", lambda nodes: None)
# What stopping this server ends ("standin #3 loses layers 0–9: it has ..."), if anything.
losing: Hook[[RpcServer], str | None] = Hook("losing", lambda server: None)
# The laptop answers at a new address (the second argument the old one): what follows, in words.
moved: Hook[[Node, str], list[str]] = Hook("moved", lambda node, was: [])
# The names of the rpc-cache files that deployments planned, preparing, loading or serving on the laptop need
# there; NotKnown (in words) when one's cannot be told, and then nothing may be removed. Fails closed: a clean
# must never guess "nothing is needed".
cache_needs: Hook[[Node], set[str]] = Hook("cache_needs", not_asked_yet)
# {file name: model name} for every tensor file a model of the library makes.
cache_owners: Hook[[], dict[str, str]] = Hook("cache_owners", lambda: {})
