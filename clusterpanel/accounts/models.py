import hashlib
import secrets
from datetime import datetime, timedelta

from django.contrib.auth.models import AbstractUser
from django.db import models
from django.utils import timezone


class Role(models.TextChoices):
    ADMIN = "admin", "Lab admin"
    USER = "user", "User"


class Limits(models.Model):
    """Fair use: how much may be asked of the lab (jobs/queue/admission.py holds to it). Empty: no limit of its
    own — a person then has the lab's default (LabLimits), a token only its owner's."""

    requests_per_minute = models.PositiveIntegerField(null=True, blank=True)
    concurrent_jobs = models.PositiveIntegerField(null=True, blank=True, help_text="Jobs waiting or running at once.")
    tokens_per_day = models.PositiveBigIntegerField(null=True, blank=True, help_text="Prompt and answer, per UTC day.")

    class Meta:
        abstract = True

    def own_limits(self) -> dict[str, int | None]:
        return {name: getattr(self, name) for name in LIMITS}


LIMITS = ("requests_per_minute", "concurrent_jobs", "tokens_per_day")


class LabLimits(Limits):
    """The lab's default limits: one row, for everyone who has none of their own."""

    ONLY = 1

    @classmethod
    def current(cls) -> "LabLimits":
        """The defaults; none set (no row yet): an unsaved row with none, so that reading them writes nothing."""
        return cls.objects.filter(pk=cls.ONLY).first() or cls(pk=cls.ONLY)


class User(AbstractUser, Limits):
    """A person using the panel: a lab admin runs the lab, a user runs their own work."""

    role = models.CharField(max_length=10, choices=Role.choices, default=Role.USER)

    @property
    def is_lab_admin(self) -> bool:
        return self.is_active and (self.role == Role.ADMIN or self.is_superuser)


class ApiToken(Limits):
    """A personal key for scripts. Only its SHA-256 is kept: the key itself is shown once, when made. It acts
    with its owner's role; its owner may make it read-only (safe methods alone) and give it an end. Its limits,
    set by a lab admin, hold on top of its owner's."""

    SCHEME = "cp_"  # recognisable in logs and secret scanners

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=12, help_text="The key's first characters, to tell keys apart.")
    digest = models.CharField(max_length=64, unique=True)
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)
    read_only = models.BooleanField(default=False, help_text="Reads only: any method but GET and HEAD is refused.")
    expires = models.DateTimeField(null=True, blank=True, help_text="Refused from then on; never when empty.")

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def expired(self) -> bool:
        return self.expires is not None and self.expires <= timezone.now()

    @classmethod
    def issue(cls, user: User, name: str, read_only: bool = False,
              expires: datetime | None = None) -> tuple["ApiToken", str]:
        """A new token and its key, which nothing can show again."""
        key = cls.SCHEME + secrets.token_urlsafe(32)
        token = cls.objects.create(user=user, name=name, prefix=key[:10], digest=digest(key), read_only=read_only,
                                   expires=expires)
        return token, key

    @classmethod
    def holding(cls, key: str) -> "ApiToken | None":
        """The token of an active user holding `key` (expired or not), noting when it was used (at most once a
        minute: it is a write)."""
        token = cls.objects.select_related("user").filter(digest=digest(key), user__is_active=True).first()
        if token is None or token.expired:
            return token
        now = timezone.now()
        if token.last_used is None or now - token.last_used > timedelta(minutes=1):
            cls.objects.filter(pk=token.pk).update(last_used=now)
        return token

    @classmethod
    def user_for(cls, key: str) -> User | None:
        """The active user holding `key`, if the token has not expired."""
        token = cls.holding(key)
        return token.user if token and not token.expired else None


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()
