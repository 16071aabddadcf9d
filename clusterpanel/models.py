"""The clusterpanel app's models live in clusterpanel/accounts/; Django registers an app's models from here."""

from clusterpanel.accounts.models import ApiToken, LabLimits, User

__all__ = ["ApiToken", "LabLimits", "User"]
