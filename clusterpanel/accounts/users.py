"""The people of the lab, managed by lab admins: add, set a role, reset a password, disable, enable.

The panel chooses every password it sets and shows it once, to be passed on and changed by its owner
(Account → Password): an admin never has to type, or know for long, anyone's password. A panel always keeps
one active lab admin: the last one can be neither disabled nor made a plain user.
"""

import secrets

from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from clusterpanel.accounts.models import Role, User


class UserError(ValueError):
    pass


def new_password() -> str:
    return secrets.token_urlsafe(12)


def add(username, role) -> tuple[User, str]:
    """A new active user and the password chosen for them."""
    if not isinstance(username, str) or not username.strip():
        raise UserError("Give the user a name.")
    username = username.strip()
    if len(username) > 150:
        raise UserError(f"That user name is {len(username)} characters long; the limit is 150.")
    try:
        UnicodeUsernameValidator()(username)
    except ValidationError:
        raise UserError("A user name holds letters, digits and @ . + - _ only.") from None
    if role not in Role.values:
        raise UserError("Choose a role: lab admin or user.")
    password = new_password()
    if User.objects.filter(username__iexact=username).exists():
        raise UserError(f"There is already a user called {username}.")
    try:
        with transaction.atomic():
            user = User.objects.create_user(username, "", password, role=role)
    except IntegrityError:
        raise UserError(f"There is already a user called {username}.") from None
    return user, password


def other_active_admins(user: User) -> bool:
    return User.objects.filter(is_active=True, role=Role.ADMIN).exclude(pk=user.pk).exists()


def set_role(user: User, role, by: User) -> None:
    if role not in Role.values:
        raise UserError("Choose a role: lab admin or user.")
    if role != Role.ADMIN and user.role == Role.ADMIN:
        if user == by:
            raise UserError("You cannot make yourself a plain user; ask another lab admin.")
        if not other_active_admins(user):
            raise UserError(f"{user.username} is the last active lab admin; make someone else one first.")
    User.objects.filter(pk=user.pk).update(role=role)
    user.role = role


def reset_password(user: User) -> str:
    """A new password, shown once; the old one, and every session opened with it, stop working."""
    if not user.is_active:
        raise UserError(f"{user.username} is disabled; enable the account first.")
    password = new_password()
    user.set_password(password)
    user.save(update_fields=["password"])
    return password


def check_disable(user: User, by: User) -> None:
    if not user.is_active:
        raise UserError(f"{user.username} is already disabled.")
    if user == by:
        raise UserError("You cannot disable yourself; ask another lab admin.")
    if user.role == Role.ADMIN and not other_active_admins(user):
        raise UserError(f"{user.username} is the last active lab admin; make someone else one first.")


def set_active(user: User, active: bool, by: User) -> None:
    if not active:
        check_disable(user, by)
    User.objects.filter(pk=user.pk).update(is_active=active)
    user.is_active = active
