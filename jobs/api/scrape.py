"""/metrics: for Prometheus, with a lab admin's API token (a read-only one is enough) or from an address the
settings allow (METRICS_ALLOWED: addresses or networks, e.g. the lab's Prometheus at 10.0.0.5)."""

import ipaddress

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

from clusterpanel.accounts import apiauth
from jobs.prometheus import PanelCollector


def allowed_address(address: str) -> bool:
    try:
        caller = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(caller in ipaddress.ip_network(allowed, strict=False) for allowed in settings.METRICS_ALLOWED)


@login_not_required
def scrape(request: HttpRequest) -> HttpResponse:
    if request.method != "GET":
        return JsonResponse({"error": "Use GET.", "field": None}, status=405)
    if not (apiauth.bearer(request) is None and allowed_address(request.META.get("REMOTE_ADDR", ""))):
        try:
            user = apiauth.authenticate(request, session=False)
        except apiauth.Unauthorized as exc:
            return JsonResponse({"error": str(exc), "field": None}, status=exc.status)
        if not user.is_lab_admin:
            return JsonResponse({"error": "Only a lab admin's token reads /metrics.", "field": None}, status=403)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PanelCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
