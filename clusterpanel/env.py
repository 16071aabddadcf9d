"""Typed readers for settings that come from the environment."""

import os
import secrets
import tempfile
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
    a temporary file beside `path` and is linked into place: a reader finds the whole text or no file,
    never a half-written one, and a process whose link fails lost the race and reads the winner's.
    """
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # 0600
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(make())
                handle.flush()
                os.fsync(handle.fileno())
            os.link(temporary, path)
        except FileExistsError:
            pass
        finally:
            os.unlink(temporary)
    text = path.read_text().strip()
    if not text:
        raise EmptySecretFile(f"{path} is empty (left by an interrupted first start?): delete it and start again.")
    return text
