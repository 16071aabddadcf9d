"""The Users page: lab admins add people, set their role, reset their password, disable and enable them."""

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.views.decorators.debug import sensitive_variables
from django.views.decorators.http import require_http_methods, require_POST

from clusterpanel import confirm, users
from clusterpanel.auth import lab_admin_required
from clusterpanel.models import Role, User


def page(request: HttpRequest, status: int = 200, **context) -> HttpResponse:
    people = User.objects.order_by("username").prefetch_related("api_tokens")
    return render(request, "account/users.html", {"people": people, "roles": Role.choices, **context},
                  status=status)


@sensitive_variables("password")
@lab_admin_required
def user_list(request: HttpRequest) -> HttpResponse:
    """GET lists the people; POST adds one and shows the chosen password on this response only."""
    if request.method != "POST":
        return page(request)
    try:
        user, password = users.add(request.POST.get("username"), request.POST.get("role"))
    except users.UserError as exc:
        return page(request, 400, error=str(exc), typed=request.POST.get("username", ""))
    return page(request, new=user, password=password)


@lab_admin_required
@require_POST
def set_role(request: HttpRequest, pk: int) -> HttpResponse:
    person = get_object_or_404(User, pk=pk)
    try:
        users.set_role(person, request.POST.get("role"), request.user)
    except users.UserError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{person.username} is now a {person.get_role_display().lower()}.")
    return redirect("users")


@sensitive_variables("password")
@lab_admin_required
@require_POST
def reset_password(request: HttpRequest, pk: int) -> HttpResponse:
    person = get_object_or_404(User, pk=pk)
    try:
        password = users.reset_password(person)
    except users.UserError as exc:
        return page(request, 400, error=str(exc))
    return page(request, reset=person, password=password)


@lab_admin_required
@require_http_methods(["GET", "POST"])
def disable(request: HttpRequest, pk: int) -> HttpResponse:
    person = get_object_or_404(User, pk=pk)
    question, back = f"Disable {person.username}?", reverse("users")
    tokens = person.api_tokens.count()
    try:
        if request.method == "POST":
            users.set_active(person, False, request.user)
        else:
            users.check_disable(person, request.user)
    except users.UserError as exc:
        return confirm.refuse(request, question, str(exc), back)
    if request.method == "GET":
        return confirm.ask(request, question, [
            f"{person.username} can no longer log in, and is logged out everywhere.",
            f"Their {tokens} API token{pluralize(tokens)} stop{pluralize(tokens, 's,')} working.",
            "Their conversations, batches and jobs stay; enabling the account again gives everything back."],
            "Disable", back)
    messages.success(request, f"{person.username} disabled.")
    return redirect("users")


@lab_admin_required
@require_POST
def enable(request: HttpRequest, pk: int) -> HttpResponse:
    person = get_object_or_404(User, pk=pk)
    users.set_active(person, True, request.user)
    messages.success(request, f"{person.username} enabled.")
    return redirect("users")
