"""How much of a laptop's disk its rpc cache may take, and which files go when it takes more. Pure: a listing
and names in, names out (nodes/servers/cleaning.py asks the laptop and the deployments).

The default cap is a share (half, settings.CACHE_CAP_PERCENT) of the room the panel's files could have: what
the cache and downloads hold plus the disk's free space. Of that sum, not of the free space alone: a cap of
"half the free space" shrinks as the cache grows, and a cache that filled a quarter of a disk would be cut by
every clean, then filled again by the next deployment. Half leaves the laptop's owner as much room again as
the cache may take, and still keeps several models' layers on a laptop of a few hundred GB.
"""

from dataclasses import dataclass

from nodes.servers.cache import CachedFile, Listing


def cap(listing: Listing, set_by_hand: int | None, percent: int) -> int:
    return set_by_hand or (listing.held + listing.free) * percent // 100


def choose(listing: Listing, needed: set[str], limit: int) -> list[CachedFile]:
    """The least recently used tensor files no deployment here needs, oldest first, until what the panel holds
    fits under `limit`; none when it already does. A file needed, or one not named as a tensor (a .part being
    written, anything else), is never chosen: the cache may stay over its cap because of them."""
    excess = listing.held - limit
    candidates = sorted((f for f in listing.files if f.is_tensor and f.name not in needed),
                        key=lambda f: (f.used, f.name))
    chosen = []
    for found in candidates:
        if excess <= 0:
            break
        chosen.append(found)
        excess -= found.size
    return chosen


@dataclass
class Holding:
    """What the cache holds of one model (`model` None: files of no model in the library)."""

    model: str | None
    files: int = 0
    bytes: int = 0
    needed: int = 0  # bytes of it that deployments on the laptop need
    used: float = 0.0  # the latest use of any of its files

    def add(self, found: CachedFile, needed: bool) -> None:
        self.files, self.bytes, self.used = self.files + 1, self.bytes + found.size, max(self.used, found.used)
        self.needed += found.size if needed else 0


def by_model(files: list[CachedFile], owners: dict[str, str], needed: set[str]) -> list[Holding]:
    """The cache's files per model, the largest first, files of no known model last."""
    rows: dict[str | None, Holding] = {}
    for found in files:
        model = owners.get(found.name)
        rows.setdefault(model, Holding(model)).add(found, found.name in needed)
    return sorted(rows.values(), key=lambda row: (row.model is None, -row.bytes, row.model or ""))
