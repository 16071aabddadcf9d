"""The page where a person makes and revokes their API tokens; a lab admin sees and revokes everyone's."""

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.debug import sensitive_variables
from django.views.decorators.http import require_POST

from clusterpanel.accounts import tokens as token_service

ENDS = [("", "Never"), ("7", "In 7 days"), ("30", "In 30 days"), ("90", "In 90 days"), ("365", "In a year")]


@sensitive_variables("context")  # holds the new key
def tokens(request: HttpRequest) -> HttpResponse:
    """GET lists the tokens; POST makes one and shows its key on this response only."""
    user = request.user
    context = {"tokens": token_service.visible(user), "ends": ENDS, "error": "",
               "everyone": token_service.visible(user, everyone=True).exclude(user=user) if user.is_lab_admin else []}
    if request.method == "POST":
        days = request.POST.get("expires_in_days", "")
        try:
            if days not in dict(ENDS):
                raise token_service.TokenError("Choose when the token ends from the list.")
            context["new"], context["key"] = token_service.make(
                user, request.POST.get("name", ""), read_only=request.POST.get("read_only") == "1",
                days=int(days) if days else None)
        except token_service.TokenError as exc:
            context["error"] = str(exc)
    return render(request, "account/tokens.html", context, status=400 if context["error"] else 200)


@require_POST
def revoke(request: HttpRequest, pk: int) -> HttpResponse:
    try:
        token = token_service.revoke(request.user, pk)
    except token_service.TokenError as exc:
        raise Http404(str(exc)) from None
    whose = "" if token.user_id == request.user.pk else f" of {token.user.username}"
    messages.success(request, f"Token “{token.name}”{whose} revoked: scripts using it now get 401.")
    return redirect("api-tokens")
