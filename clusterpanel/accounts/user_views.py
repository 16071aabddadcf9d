"""The Users page: lab admins add people, set their role and limits, reset their password, disable and enable
them, and set the lab's default limits and each API token's."""

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.views.decorators.debug import sensitive_variables
from django.views.decorators.http import require_http_methods, require_POST

from clusterpanel.accounts import limits, users
from clusterpanel.accounts.auth import lab_admin_required
from clusterpanel.accounts.models import LIMITS, ApiToken, LabLimits, Role, User
from clusterpanel.kit import confirm


def page(request: HttpRequest, status: int = 200, **context) -> HttpResponse:
    people = list(User.objects.order_by("username").prefetch_related("api_tokens"))
    defaults = LabLimits.current()
    inherited = {name: f"default {value:,}" if value else "no limit" for name, value in defaults.own_limits().items()}
    for person in people:
        person.limit_inputs, person.limits_form = limit_inputs(person, inherited), f"limits-{person.pk}"
    tokens = list(ApiToken.objects.select_related("user").order_by("user__username", "name", "pk"))
    for token in tokens:
        token.limit_inputs = limit_inputs(token, dict.fromkeys(LIMITS, "owner's only"))
        token.limits_form = f"token-limits-{token.pk}"
    return render(request, "account/users.html", {
        "people": people, "roles": Role.choices, "tokens": tokens,
        "defaults": limit_inputs(defaults, dict.fromkeys(LIMITS, "no limit")), **context}, status=status)


def limit_inputs(target, placeholders: dict[str, str]) -> list[dict]:
    """A limits form's fields: what is set (empty: none of its own) and what empty means here."""
    return [{"name": name, "label": limits.NAMES[name], "value": getattr(target, name) or "",
             "placeholder": placeholders[name]} for name in LIMITS]


def set_limits_of(request: HttpRequest, target, whose: str) -> HttpResponse:
    try:
        limits.set_limits(target, limits.from_form(request.POST))
    except limits.LimitError as exc:
        return page(request, 400, error=f"{whose}: {exc} Nothing was changed.")
    messages.success(request, f"Limits of {whose} saved.")
    return redirect("users")


@lab_admin_required
@require_POST
def set_default_limits(request: HttpRequest) -> HttpResponse:
    return set_limits_of(request, LabLimits.current(), "the lab (its defaults)")


@lab_admin_required
@require_POST
def set_user_limits(request: HttpRequest, pk: int) -> HttpResponse:
    person = get_object_or_404(User, pk=pk)
    return set_limits_of(request, person, person.username)


@lab_admin_required
@require_POST
def set_token_limits(request: HttpRequest, pk: int) -> HttpResponse:
    token = get_object_or_404(ApiToken.objects.select_related("user"), pk=pk)
    return set_limits_of(request, token, f"{token.user.username}'s token “{token.name}”")


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
