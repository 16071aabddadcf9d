"""Copy a file to a laptop: resumable, checked by sha256 on the laptop, skipped when already there."""

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from nodes.remote import ssh

Report = Callable[..., None]


class TransferError(Exception):
    pass


@dataclass(frozen=True)
class Transferred:
    skipped: bool
    sent: int
    resumed_from: int


class Progress:
    """Bytes, rate and time left, passed to `report` at most `hz` times a second."""

    def __init__(self, report: Report, label: str, hz: float = 4.0) -> None:
        self.report, self.label, self.interval = report, label, 1 / hz
        self.started = self.last = time.monotonic()
        self.first: int | None = None

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if self.first is None:
            self.first = done
        if now - self.last < self.interval and done < total:
            return
        self.last = now
        rate = (done - self.first) / max(now - self.started, 1e-6)
        eta = (total - done) / rate if rate > 0 else None
        self.report(f"{self.label}: {done / 2**20:.1f} of {total / 2**20:.1f} MiB", bytes_done=done,
                    bytes_total=total, mb_per_s=round(rate / 1e6, 2), eta_s=round(eta, 1) if eta else None)


def remote_sha256(target: ssh.SSHTarget, path: str) -> str | None:
    # macOS has shasum, not sha256sum: a Mac builds its runtime from a source copied this way.
    result = ssh.sh(target, '[ -f "$1" ] && { sha256sum -- "$1" 2>/dev/null || shasum -a 256 -- "$1"; } | cut -c1-64',
                    ssh.remote_path(path), timeout=300)
    digest = result.stdout.strip()
    return digest if len(digest) == 64 else None


def push_verified(target: ssh.SSHTarget, local: Path, remote: str, sha256: str, report: Report) -> Transferred:
    """Make `remote` a copy of `local` whose sha256 is `sha256`, sending only what is missing."""
    if remote_sha256(target, remote) == sha256:
        report(f"{local.name} is already on the laptop and intact.")
        return Transferred(True, 0, 0)
    folder = ssh.remote_path(remote).rsplit("/", 1)[0] if "/" in remote else "."
    ssh.sh(target, 'mkdir -p -- "$1"', folder)
    pushed = ssh.push(target, local, remote, progress=Progress(report, f"Copying {local.name}"))
    if remote_sha256(target, remote) != sha256:
        ssh.sh(target, 'rm -f -- "$1"', ssh.remote_path(remote))
        raise TransferError(f"{local.name} arrived damaged on the laptop (sha256 differs); it was removed, try again.")
    report(f"{local.name} copied and verified.")
    return Transferred(False, pushed.sent, pushed.resumed_from)
