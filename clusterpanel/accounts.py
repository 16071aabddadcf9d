"""The first lab admin, created once so a fresh panel can be logged into."""

import os
import secrets

from clusterpanel.models import Role, User

FIRST_ADMIN = "admin"


def ensure_first_admin() -> tuple[str, str | None]:
    """The admin's username, and its password when it was created just now."""
    existing = User.objects.filter(role=Role.ADMIN, is_active=True).order_by("pk").first()
    if existing is not None:
        return existing.username, None
    password = os.environ.get("ADMIN_PASSWORD") or secrets.token_urlsafe(12)
    User.objects.create_superuser(FIRST_ADMIN, "", password, role=Role.ADMIN)
    return FIRST_ADMIN, password
