"""An rpc-server's tensor cache on a laptop: what it holds, and filling it from a local GGUF file.

The server (started with `-c` and LLAMA_CACHE=<install_dir>/cache, nodes/servers/rpcserver.py)
looks for `<install_dir>/cache/rpc/<16 hex digits>` and sets a tensor from that
file without asking the head for its bytes. It trusts the file: one that is cut
short would load a cut tensor, so a file only ever appears whole (ssh.push
renames its .part) and one of the wrong size is sent again.

The cache is what makes a redeploy fast, and it would grow for ever (upstream's
complaint, llama.cpp #27585): nodes/servers/cleaning.py keeps it under a cap, through
`listing()`, `remove()` and `touch()` here. Only names of 16 hex digits are ever
removed or touched, checked here and again on the laptop, whatever a list holds.
Each seed, and each clean, marks the files a deployment needs as used now (their
mtime, which the server never reads): the laptop's own atime says little (relatime
updates it once a day at most, noatime never). A file's last use is the later of
the two.
"""

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import redis
from django.conf import settings

from nodes.remote import ssh

# Free KiB of the cache's file system, then "<size> <name>" for each file in it.
LIST = 'mkdir -p "$1" && cd "$1" && df -Pk . | awk \'NR==2 {print $4}\' && ' \
       '{ stat -c "%s %n" -- * 2>/dev/null; true; }'
# The disk's size and free KiB, the downloads folder's KiB, then "<size> <atime> <mtime> <name>" per file of
# the cache (find batches the names as the laptop's command line allows; stat's options are GNU's or BSD's).
LISTING = """mkdir -p -- "$1/cache/rpc" && cd -- "$1" || exit 3
df -Pk . | awk 'NR==2 {print $2, $4}'
if [ -d downloads ]; then du -sk downloads | awk '{print $1}'; else echo 0; fi
cd cache/rpc || exit 3
if stat -c %s . >/dev/null 2>&1; then set -- -c '%s %X %Y %n'; else set -- -f '%z %a %m %N'; fi
find . -maxdepth 1 -type f -exec stat "$@" {} +
"""
# Names arrive one a line on standard input; those of 16 hex digits alone reach rm (or touch), then the free KiB.
REMOVE = """cd -- "$1/cache/rpc" 2>/dev/null || { echo 0; exit 0; }
grep -E '^[0-9a-f]{16}$' | xargs rm -f -- || exit 4
df -Pk . | awk 'NR==2 {print $4}'
"""
TOUCH = """cd -- "$1/cache/rpc" 2>/dev/null || exit 0
grep -E '^[0-9a-f]{16}$' | xargs touch -c --
"""
CACHE_NAME = re.compile(r"[0-9a-f]{16}")
LOCK_TTL_S = 330  # longer than the longest step under it (a removal: 300 s), renewed between steps


class CacheError(Exception):
    pass


@dataclass(frozen=True)
class CachedFile:
    name: str
    size: int
    used: float  # when it was last read or marked used (the later of atime and mtime), in seconds since 1970

    @property
    def is_tensor(self) -> bool:
        return CACHE_NAME.fullmatch(self.name) is not None


@dataclass(frozen=True)
class Listing:
    disk: int  # the file system's size, bytes
    free: int
    downloads: int  # bytes in <install_dir>/downloads (runtime and source tarballs), counted, never removed
    files: list[CachedFile]

    @property
    def cache_bytes(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def held(self) -> int:
        """What the panel keeps on the laptop's disk: the cache and the downloads."""
        return self.cache_bytes + self.downloads


@dataclass(frozen=True)
class Tensor:
    name: str
    hash: str
    offset: int
    size: int


@dataclass(frozen=True)
class Seeded:
    sent: int
    skipped: int  # bytes already there
    files: int


def folder(install_dir: str) -> str:
    return ssh.remote_path(f"{install_dir.rstrip('/')}/cache/rpc")


def contents(target: ssh.SSHTarget, install_dir: str) -> tuple[int, dict[str, int]]:
    """Free bytes where the cache lives, and its files with their sizes."""
    result = ssh.sh(target, LIST, folder(install_dir))
    lines = result.stdout.split("\n")
    if result.exit_status != 0 or not lines[0].strip().isdigit():
        raise CacheError(f"Cannot read the tensor cache {folder(install_dir)}: "
                         f"{result.stderr.strip() or 'no answer'}")
    files = {}
    for line in lines[1:]:
        size, _, name = line.partition(" ")
        if size.isdigit():
            files[name] = int(size)
    return int(lines[0]) * 1024, files


def missing(tensors: list[Tensor], present: dict[str, int]) -> list[Tensor]:
    """Tensors whose file is absent or of another size (cut short by a server that died writing it)."""
    unique = {t.hash: t for t in tensors}.values()
    return [t for t in unique if present.get(t.hash) != t.size]


def seed(target: ssh.SSHTarget, install_dir: str, model: Path, tensors: list[Tensor],
         progress: Callable[[int, int], None]) -> Seeded:
    """Copy every tensor the cache lacks from `model`'s bytes; `progress(bytes done, bytes to do)`."""
    free, present = contents(target, install_dir)
    todo = missing(tensors, present)
    total = sum(t.size for t in todo)
    if total > free:
        raise CacheError(f"The tensor cache needs {total / 2**30:.2f} GiB more on {target.host}; "
                         f"only {free / 2**30:.2f} GiB is free there.")
    done = sent = 0
    for tensor in todo:
        pushed = ssh.push(target, model, f"{folder(install_dir)}/{tensor.hash}", start=tensor.offset,
                          length=tensor.size, progress=lambda d, _t, base=done: progress(base + d, total))
        done, sent = done + tensor.size, sent + pushed.sent
        progress(done, total)
    unique = {t.hash: t for t in tensors}
    touch(target, install_dir, list(unique))  # needed now, copied or not: the last to go when the cache is full
    return Seeded(sent=sent, skipped=sum(t.size for t in unique.values()) - total, files=len(todo))


def clear(target: ssh.SSHTarget, install_dir: str) -> None:
    ssh.sh(target, 'rm -rf -- "$1"', folder(install_dir))


def listing(target: ssh.SSHTarget, install_dir: str) -> Listing:
    """Every file in the cache with its size and last use, the downloads' size, and the disk's: one command."""
    result = ssh.sh(target, LISTING, ssh.remote_path(install_dir.rstrip("/")), timeout=120)
    lines = result.stdout.split("\n")
    head = lines[0].split() if lines else []
    if result.exit_status != 0 or len(head) != 2 or not all(x.isdigit() for x in head) or len(lines) < 2:
        raise CacheError(f"Cannot list the tensor cache {folder(install_dir)}: "
                         f"{result.stderr.strip() or 'no answer'}")
    files = [found for line in lines[2:] if (found := cached_file(line))]
    downloads = int(lines[1]) * 1024 if lines[1].strip().isdigit() else 0
    return Listing(int(head[0]) * 1024, int(head[1]) * 1024, downloads, files)


def cached_file(line: str) -> CachedFile | None:
    """A listing's line; None for one that is not (a name holding a line break splits in two: both skipped)."""
    parts = line.split(" ", 3)
    if len(parts) != 4 or not all(part.isdigit() for part in parts[:3]):
        return None
    return CachedFile(parts[3].removeprefix("./"), int(parts[0]), float(max(int(parts[1]), int(parts[2]))))


def remove(target: ssh.SSHTarget, install_dir: str, names: list[str]) -> int:
    """Delete these files of the cache (names of 16 hex digits only); the disk's free bytes after."""
    names = [name for name in names if CACHE_NAME.fullmatch(name)]
    result = ssh.sh(target, REMOVE, ssh.remote_path(install_dir.rstrip("/")), timeout=300,
                    feed="".join(f"{name}\n" for name in names))
    free = result.stdout.strip().split("\n")[-1]
    if result.exit_status != 0 or not free.isdigit():
        raise CacheError(f"Removing from the tensor cache {folder(install_dir)} failed: "
                         f"{result.stderr.strip() or 'no answer'}")
    return int(free) * 1024


def touch(target: ssh.SSHTarget, install_dir: str, names: list[str]) -> None:
    """Mark these files of the cache as used now (those that exist; names of 16 hex digits only)."""
    names = [name for name in names if CACHE_NAME.fullmatch(name)]
    if names:
        ssh.sh(target, TOUCH, ssh.remote_path(install_dir.rstrip("/")), timeout=120,
               feed="".join(f"{name}\n" for name in names))


@contextmanager
def locked(node_id: int, wait_s: float, busy: str) -> Iterator:
    """The laptop's cache to one filler or cleaner at a time (two writing one .part would interleave their bytes;
    a clean must not list the cache while a seed fills it); CacheError(`busy`) after `wait_s` seconds. The lock
    expires after LOCK_TTL_S unless its holder renews it (`reacquire()`), so a holder that died frees it."""
    lock = redis.Redis.from_url(settings.REDIS_URL).lock(f"clusterpanel:rpc-cache:{node_id}", timeout=LOCK_TTL_S,
                                                          blocking_timeout=wait_s)
    if not lock.acquire():
        raise CacheError(busy)
    try:
        yield lock
    finally:
        try:
            lock.release()
        except redis.exceptions.LockError:
            pass  # expired while we worked
