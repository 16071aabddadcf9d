"""Role checks: lab admins manage the lab; users see only their own work."""

from collections.abc import Callable
from functools import wraps
from typing import Any

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
