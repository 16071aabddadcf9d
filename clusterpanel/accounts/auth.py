"""Role checks (lab admins manage the lab; users see only their own work) and the login throttle."""

from collections.abc import Callable
from functools import wraps
from typing import Any

from axes.backends import AxesStandaloneBackend
from django.contrib.auth.mixins import AccessMixin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse

View = Callable[..., HttpResponse]


def lab_admin_required(view: View) -> View:
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated or not request.user.is_lab_admin:
            raise PermissionDenied("Only lab admins can do this.")
        return view(request, *args, **kwargs)

    return wrapped


class LabAdminRequiredMixin(AccessMixin):
    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated or not request.user.is_lab_admin:
            raise PermissionDenied("Only lab admins can do this.")
        return super().dispatch(request, *args, **kwargs)


class LoginThrottle(AxesStandaloneBackend):
    """django-axes' lockout check on every login made through a page. A call with no request comes from the
    panel's own code (a test client, a command), not from someone guessing: nothing to throttle there."""

    def authenticate(self, request: HttpRequest | None, *args: Any, **kwargs: Any) -> None:
        if request is not None:
            super().authenticate(request, *args, **kwargs)
