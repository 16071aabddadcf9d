"""The page where a person makes and revokes their API tokens."""

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.debug import sensitive_variables
from django.views.decorators.http import require_POST

from clusterpanel.models import ApiToken


@sensitive_variables("context")  # holds the new key
def tokens(request: HttpRequest) -> HttpResponse:
    """GET lists the tokens; POST makes one and shows its key on this response only."""
    context = {"tokens": request.user.api_tokens.all(), "error": ""}
    if request.method == "POST":
        name = request.POST.get("name", "").strip()
        if not name or len(name) > 100 or not name.isprintable():  # PostgreSQL refuses a NUL in text: a 500
            context["error"] = ("Give the token a name of up to 100 printable characters, e.g. the script that "
                                "uses it.")
        else:
            context["new"], context["key"] = ApiToken.issue(request.user, name)
    return render(request, "account/tokens.html", context, status=400 if context["error"] else 200)


@require_POST
def revoke(request: HttpRequest, pk: int) -> HttpResponse:
    token = get_object_or_404(ApiToken, pk=pk, user=request.user)
    token.delete()
    messages.success(request, f"Token “{token.name}” revoked: scripts using it now get 401.")
    return redirect("api-tokens")
