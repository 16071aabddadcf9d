from django.contrib.auth.models import AbstractUser
from django.db import models


class Role(models.TextChoices):
    ADMIN = "admin", "Lab admin"
    USER = "user", "User"


class User(AbstractUser):
    """A person using the panel: a lab admin runs the lab, a user runs their own work."""

    role = models.CharField(max_length=10, choices=Role.choices, default=Role.USER)

    @property
    def is_lab_admin(self) -> bool:
        return self.is_active and (self.role == Role.ADMIN or self.is_superuser)
