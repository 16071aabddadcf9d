"""Secrets at rest: Fernet, with its key from FERNET_KEY or generated once into the data folder."""

import os
from functools import cache

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings
from django.db import models


class SecretUnreadable(RuntimeError):
    pass


@cache
def fernet() -> Fernet:
    key = os.environ.get("FERNET_KEY")
    if not key:
        path = settings.DATA_DIR / "fernet.key"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(Fernet.generate_key())
        key = path.read_text().strip()
    return Fernet(key)


def encrypt(text: str) -> str:
    return fernet().encrypt(text.encode()).decode()


def decrypt(token: str) -> str:
    try:
        return fernet().decrypt(token.encode()).decode()
    except InvalidToken:
        raise SecretUnreadable(
            "A stored secret cannot be decrypted: the data folder's fernet.key (or FERNET_KEY) "
            "is not the one it was encrypted with."
        ) from None


class EncryptedTextField(models.TextField):
    """Holds text encrypted in the database; Python code sees plain text."""

    def from_db_value(self, value, expression, connection):
        return decrypt(value) if value else value

    def get_prep_value(self, value):
        value = super().get_prep_value(value)
        return encrypt(value) if value else value
