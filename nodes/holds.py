"""What the deployments above a laptop make of it: which hold its layers, how many ever used it, what losing one
of its rpc-servers ends, what a move to a new address sets going, and which files of its rpc cache they need.

nodes/ describes machines and imports nothing that runs deployments. The apps that do answer these questions
by registering their functions when they start (models_app/apps.py, jobs/apps.py); until one has, no deployment
holds anything, and nothing follows a move.
"""

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Holder:
    """A deployment holding a laptop's layers, in words: "standin #3", "ready"."""

    name: str
    state: str

    def __str__(self) -> str:
        return f"{self.name} ({self.state})"


QUESTIONS = {
    "holders": lambda node: [],  # the active deployments holding `node`: list[Holder]
    "used_by": lambda nodes: 0,  # how many deployments, in any state, used any of `nodes`
    "forget_used": lambda nodes: None,  # delete the deployments that used `nodes` (inactive: checked before)
    "losing": lambda server: None,  # what stopping `server` ends ("standin #3 loses layers 0–9: it has ..."), if any
    "moved": lambda node, was: [],  # `node` answers at a new address (`was` the old one): what follows, in words
    # The names of the rpc-cache files that deployments planned, preparing, loading or serving on `node` need
    # there: set[str]; NotKnown (in words) when one's cannot be told, and then nothing may be removed.
    "cache_needs": lambda node: not_asked_yet(),  # fail closed: a clean must never guess "nothing is needed"
    "cache_owners": lambda: {},  # {file name: model name} for every tensor file a model of the library makes
}
answers: dict[str, Callable] = dict(QUESTIONS)


class NotKnown(Exception):
    """What a deployment needs cannot be told (its model's file is gone and its hashes were never taken)."""


def not_asked_yet():
    raise NotKnown("no app answers which files the deployments need (models_app is not loaded here)")


def answer(**functions: Callable) -> None:
    """Register answers to some of QUESTIONS (an app above calls it from its AppConfig.ready())."""
    unknown = set(functions) - set(QUESTIONS)
    if unknown:
        raise TypeError(f"nodes.holds asks no question named {', '.join(sorted(unknown))}")
    answers.update(functions)


def holders(node) -> list[Holder]:
    return answers["holders"](node)


def used_by(nodes) -> int:
    return answers["used_by"](nodes)


def forget_used(nodes) -> None:
    answers["forget_used"](nodes)


def losing(server) -> str | None:
    return answers["losing"](server)


def moved(node, was: str) -> list[str]:
    return answers["moved"](node, was)


def cache_needs(node) -> set[str]:
    return answers["cache_needs"](node)


def cache_owners() -> dict[str, str]:
    return answers["cache_owners"]()
