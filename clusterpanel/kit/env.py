"""Typed readers for settings that come from the environment."""

import contextlib
import os
import secrets
import tempfile
import time
from collections.abc import Callable
from pathlib import Path


class EmptySecretFile(RuntimeError):
    pass


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise SystemExit(f"{name} must be a whole number, got {value!r}") from None


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


def env_secret(name: str, path: Path) -> str:
    """The secret from the environment, else one generated once into `path`."""
    if os.environ.get(name):
        return os.environ[name]
    return made_once(path, lambda: secrets.token_urlsafe(50))


def made_once(path: Path, make: Callable[[], str]) -> str:
    """The text in `path`; the first process to get here writes `make()` into it.

    Web and workers start together on a first boot (docker compose) and all reach here. The text goes to
    a temporary file beside `path` and is published whole: a reader finds the whole text or no file, never
    a half-written one, and a process that lost the race reads the winner's.
    """
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # 0600
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(make())
                handle.flush()
                os.fsync(handle.fileno())
            publish(temporary, path)
        finally:
            with contextlib.suppress(FileNotFoundError):  # renamed into place
                os.unlink(temporary)
    text = path.read_text().strip()
    if not text:
        raise EmptySecretFile(f"{path} is empty (left by an interrupted first start?): delete it and start again.")
    return text


def publish(temporary: str, path: Path) -> None:
    """`temporary` becomes `path` unless another process's file got there first (then that one stays)."""
    try:
        os.link(temporary, path)  # fails if `path` exists: the first link wins
    except FileExistsError:
        pass
    except OSError:  # no hard links here (some FUSE, SMB and bind mounts: EPERM, ENOTSUP, EXDEV...)
        publish_under_lock(temporary, path)


def publish_under_lock(temporary: str, path: Path) -> None:
    """Without hard links: whoever creates the lock file renames its text into place (a rename replaces,
    so only the lock holder may do it, and only while `path` is still missing); the others wait for it."""
    lock = path.with_name(f".{path.name}.lock")
    try:
        os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        wait_for(path, lock)
        return
    try:
        if not path.exists():  # a holder before us may have published and let go already
            os.replace(temporary, path)
    finally:
        os.unlink(lock)


def wait_for(path: Path, lock: Path, within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not path.exists():
        if time.monotonic() > deadline:
            raise EmptySecretFile(f"{path} was not written within {within:.0f} s and {lock} is still there "
                                  "(left by an interrupted first start?): delete it and start again.")
        time.sleep(0.01)
