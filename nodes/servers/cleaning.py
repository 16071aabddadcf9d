"""Keeping a laptop's rpc cache under its cap: list it, remove the least recently used files that no
deployment on the laptop needs, and record what it holds (the laptop's page shows it).

Nothing a deployment planned, preparing, loading or serving there needs is removed (nodes/laptops/holds.py asks the
deployments). A deployment may start while a clean runs, so the clean holds the laptop's cache lock (the one a
pre-seed holds while it copies, nodes/servers/cache.py) from its listing to its removal, and asks what is needed
only after it has listed: a deployment seen then is kept whole; one recorded later cannot be loading yet (its
runtime and servers come first), and its pre-seed waits for the lock, then copies again whatever went. Files
still needed are marked used at each clean, so the files of a deployment that ran long are the last to go
after it stops.
"""

import time
from dataclasses import dataclass

from django.conf import settings
from django.template.defaultfilters import pluralize
from django.utils import timezone

from clusterpanel.kit.units import size
from nodes.laptops import holds
from nodes.models import Node
from nodes.servers import cache as rpccache
from nodes.servers import cachecap

WAIT_FOR_LOCK_S = 30
BUSY = (f"A deployment is filling this laptop's cache, or another clean runs: nothing was removed after "
        f"{WAIT_FOR_LOCK_S} s of waiting. Each deployment cleans the cache once it has filled it.")


class CleanRefused(Exception):
    pass


@dataclass(frozen=True)
class Cleaned:
    removed: int
    freed: int
    state: dict
    decide_s: float  # listing and choosing: the time the laptop's cache is locked before anything is removed
    remove_s: float

    def summary(self) -> str:
        state = self.state
        holds_now = (f"the cache holds {size(state['cache'])} in {state['files']} file{pluralize(state['files'])} "
                     f"of its {size(state['cap'])} cap (with {size(state['downloads'])} of downloads); "
                     f"{size(state['free'])} of the disk is free")
        if self.removed:
            said = (f"Removed {self.removed} file{pluralize(self.removed)} ({size(self.freed)}), the least recently "
                    f"used that no deployment here needs: {holds_now}.")
        else:
            said = f"Nothing to remove: {holds_now}."
        if state["cache"] + state["downloads"] > state["cap"]:
            said += (f" It stays over its cap: deployments here need {size(state['needed'])} of it, and files "
                     "that are not tensors (a copy being written, downloads) are never removed.")
        return said


def clean(node: Node, why: str) -> Cleaned:
    """Bring the laptop's cache under its cap. CleanRefused when it cannot be done safely now, CacheError when
    the laptop's cache cannot be listed or changed (busy: BUSY), SSHError when the laptop cannot be reached."""
    target = node.ssh_target()
    asked(node)  # first outside the lock: a model whose file changed is hashed again, which may take minutes
    with rpccache.locked(node.pk, WAIT_FOR_LOCK_S, BUSY) as lock:
        started = time.monotonic()
        found = rpccache.listing(target, node.install_dir)
        needed = asked(node)  # after the listing: a deployment that began before it is seen
        limit = cachecap.cap(found, node.cache_cap, settings.CACHE_CAP_PERCENT)
        chosen = cachecap.choose(found, needed, limit)
        decided = time.monotonic()
        lock.reacquire()  # each step may take up to its SSH timeout: the lock must outlast the removal
        free = rpccache.remove(target, node.install_dir, [f.name for f in chosen]) if chosen else found.free
        lock.reacquire()
        rpccache.touch(target, node.install_dir, [f.name for f in found.files if f.name in needed])
        removed_s = time.monotonic() - decided
    gone = {f.name for f in chosen}
    left = [f for f in found.files if f.name not in gone]
    state = record(node, found, left, needed, limit, free, why, len(chosen), sum(f.size for f in chosen))
    return Cleaned(len(chosen), state["freed"], state, decided - started, removed_s)


def asked(node: Node) -> set[str]:
    try:
        return holds.cache_needs(node)
    except holds.NotKnown as exc:
        raise CleanRefused(f"Nothing was removed: {exc}.") from None


def record(node: Node, found: rpccache.Listing, left: list[rpccache.CachedFile], needed: set[str], limit: int,
           free: int, why: str, removed: int, freed: int) -> dict:
    """The cache as it is after the clean, kept on the laptop's row for its page and the API."""
    rows = cachecap.by_model(left, holds.cache_owners(), needed)
    state = {"checked": timezone.now().isoformat(), "why": why, "disk": found.disk, "free": free,
             "cache": sum(f.size for f in left), "files": len(left), "downloads": found.downloads,
             "cap": limit, "cap_set_by_hand": node.cache_cap is not None,
             "needed": sum(f.size for f in left if f.name in needed), "removed": removed, "freed": freed,
             "models": [vars(row) for row in rows]}
    Node.objects.filter(pk=node.pk).update(cache_state=state)
    node.cache_state = state
    return state
