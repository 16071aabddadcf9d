from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views import defaults

from clusterpanel import status
from clusterpanel.accounts.auth import lab_admin_required


def landing(request: HttpRequest) -> HttpResponse:
    """Where a login without ?next= goes: end users come to talk to the model, lab admins to the cluster."""
    return redirect("home" if request.user.is_lab_admin else "chat:home")


def home(request: HttpRequest) -> HttpResponse:
    from clusterpanel import dashboard

    if not request.user.is_lab_admin:
        return render(request, "home_user.html", dashboard.own_work(request.user))
    return render(request, "home.html", {"nodes": dashboard.laptops(), "deployments": dashboard.deployment_rows(),
                                         "failures": dashboard.recent_failures()})


@lab_admin_required
def dashboard_deployments(request: HttpRequest) -> JsonResponse:
    """The dashboard's deployments table, for the page to refresh every few seconds."""
    from clusterpanel.dashboard import deployment_rows

    return JsonResponse({"deployments": deployment_rows()})


@lab_admin_required
def system_status(request: HttpRequest) -> HttpResponse:
    return render(request, "status.html", {"checks": status.all_checks()})


@login_not_required
def healthz(request: HttpRequest) -> JsonResponse:
    """For load balancers and compose health checks: says only whether the DB answers."""
    check = status.check_database()
    return JsonResponse({"ok": check.ok}, status=200 if check.ok else 503)


@login_not_required
def admin_login(request: HttpRequest) -> HttpResponse:
    """The Django admin's login is the panel's. Someone already logged in lands here only because the admin
    site wants staff: sending them to log in again looped forever, so they are told where to go instead."""
    if request.user.is_authenticated:
        raise PermissionDenied("The Django admin site is for the panel's maintainers (staff accounts). "
                               "Lab admins manage people on the Users page and the lab from the menu.")
    return redirect_to_login(request.GET.get("next", "/admin/"))


@login_not_required
def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers ask for /favicon.ico wherever a page names no icon (a JSON answer, a download)."""
    from django.templatetags.static import static

    return redirect(static("favicon.svg"), permanent=True)


def server_error(request: HttpRequest) -> HttpResponse:
    """A fault of the panel's own (handler500): scripts get it in their API's JSON shape, never an HTML page;
    people get the page. What went wrong is in the panel's log, not in the answer."""
    message = "The panel failed while answering this request; what went wrong is in its log."
    if request.path.startswith("/v1/"):  # OpenAI's error shape, as every other /v1 answer
        return JsonResponse({"error": {"message": message, "type": "server_error", "param": None,
                                       "code": "internal_error"}}, status=500)
    if request.path.startswith("/api/"):
        return JsonResponse({"error": message, "field": None}, status=500)
    return defaults.server_error(request)
