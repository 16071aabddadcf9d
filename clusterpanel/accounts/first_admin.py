"""The first lab admin, created once so a fresh panel can be logged into.

A password the panel chose is written to a file in the data folder that only its owner can read, never to
the output of `createadmin` (docker compose keeps that in its logs for good). The file goes as soon as the
password no longer opens the account (it was changed), checked at each start.
"""

import contextlib
import os
import secrets
import tempfile
from pathlib import Path

from django.conf import settings

from clusterpanel.accounts.models import Role, User

FIRST_ADMIN = "admin"


def password_file() -> Path:
    return settings.DATA_DIR / "first_admin_password"


def ensure_first_admin() -> tuple[str, str | None]:
    """The admin's username, and its password when it was created just now."""
    existing = User.objects.filter(role=Role.ADMIN, is_active=True).order_by("pk").first()
    if existing is not None:
        forget_changed_password()
        return existing.username, None
    chosen = os.environ.get("ADMIN_PASSWORD")
    password = chosen or secrets.token_urlsafe(12)
    User.objects.create_superuser(FIRST_ADMIN, "", password, role=Role.ADMIN)
    if not chosen:  # whoever set ADMIN_PASSWORD knows it already
        write_for_owner(password_file(), password + "\n")
    return FIRST_ADMIN, password


def write_for_owner(path: Path, text: str) -> None:
    """`text` in `path`, mode 0600 from the start (mkstemp), replacing any file left by an earlier database."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(temporary, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


def forget_changed_password() -> None:
    path = password_file()
    if not path.exists():
        return
    admin = User.objects.filter(username=FIRST_ADMIN).first()
    if admin is None or not admin.check_password(path.read_text().strip()):
        path.unlink(missing_ok=True)
