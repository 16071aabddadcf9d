"""An rpc-server's tensor cache on a laptop: what it holds, and filling it from a local GGUF file.

The server (started with `-c` and LLAMA_CACHE=<install_dir>/cache, nodes/rpcserver.py)
looks for `<install_dir>/cache/rpc/<16 hex digits>` and sets a tensor from that
file without asking the head for its bytes. It trusts the file: one that is cut
short would load a cut tensor, so a file only ever appears whole (ssh.push
renames its .part) and one of the wrong size is sent again.

Nothing here deletes the cache: it is what makes a redeploy fast. Files are
named by content, so a stale one is harmless; `clear()` empties it on demand.
"""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from nodes import ssh

# Free KiB of the cache's file system, then "<size> <name>" for each file in it.
LIST = 'mkdir -p "$1" && cd "$1" && df -Pk . | awk \'NR==2 {print $4}\' && ' \
       '{ stat -c "%s %n" -- * 2>/dev/null; true; }'


class CacheError(Exception):
    pass


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
    skipped = sum(t.size for t in {t.hash: t for t in tensors}.values()) - total
    return Seeded(sent=sent, skipped=skipped, files=len(todo))


def clear(target: ssh.SSHTarget, install_dir: str) -> None:
    ssh.sh(target, 'rm -rf -- "$1"', folder(install_dir))
