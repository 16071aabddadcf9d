"""The REST API under /api/: one django-ninja API whose routers live with their apps. Validation, errors and
the OpenAPI 3.1 schema (/api/schema/) come from the same declarations; /api/docs/ browses it with assets the
panel serves itself (an offline lab has no CDN)."""

import inspect

from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse
from django.urls import URLPattern, re_path, reverse
from ninja import NinjaAPI

from clusterpanel.apikit import PanelAuth, SafeParser, install_error_handlers, no_such_path, problem
from clusterpanel.limit_api import router as limits
from clusterpanel.token_api import router as tokens
from jobs.api.batches import router as batches
from jobs.api.views import router as jobs
from jobs.usage.api import router as usage
from models_app.api import models, plans
from models_app.api_deployments import router as deployments
from models_app.api_oncall import router as on_call
from models_app.api_uploads import router as uploads
from nodes.api import router as nodes
from nodes.api_actions import router as node_actions
from nodes.api_bulk import router as node_selections
from nodes.api_scans import router as node_scans

api = NinjaAPI(
    title="clusterpanel", version="1", urls_namespace="api", auth=PanelAuth(), parser=SafeParser(),
    openapi_url="/schema/", docs_url="/docs/",
    description="Everything the panel's pages do, for scripts. Authenticate with `Authorization: Bearer "
                "<token>` (tokens at /account/tokens/; the Authorize button takes one), or a logged-in session. "
                "Errors are `{\"error\": sentence, \"field\": name or null}`.\n\n"
                "The model itself also answers at **/v1/**, the OpenAI-compatible API (models, chat completions, "
                "completions, files, batches): point any OpenAI client at `<panel>/v1` with a token as its API "
                "key. It follows OpenAI's own reference rather than this schema; docs/api.md describes both.")
install_error_handlers(api)
api.add_router("/jobs/", jobs, tags=["jobs"])
api.add_router("/batches/", batches, tags=["batches"])
api.add_router("/models/", models, tags=["models"])
api.add_router("/models/", on_call, tags=["models"])
api.add_router("/uploads/", uploads, tags=["models"])
api.add_router("/plans/", plans, tags=["plans"])
api.add_router("/deployments/", deployments, tags=["deployments"])
api.add_router("/nodes/actions/", node_selections, tags=["laptops"])  # before /nodes/<name>/ would take it
api.add_router("/nodes/scans/", node_scans, tags=["laptops"])
api.add_router("/nodes/", nodes, tags=["laptops"])
api.add_router("/nodes/", node_actions, tags=["laptops"])
api.add_router("/tokens/", tokens, tags=["tokens"])
api.add_router("/limits/", limits, tags=["limits"])
api.add_router("/usage/", usage, tags=["usage"])


def in_our_shape(response: HttpResponse) -> HttpResponse:
    if not isinstance(response, HttpResponseNotAllowed):
        return response
    allowed = response["Allow"]
    refused = problem(f"Use {allowed.replace(', ', ' or ')}.", 405)
    refused["Allow"] = allowed
    return refused


def scripts_door(view):
    """A script's door: no login redirect (the API answers 401 itself), and a wrong method answered in the
    API's error shape."""
    if inspect.iscoroutinefunction(view):
        async def door(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            return in_our_shape(await view(request, *args, **kwargs))
    else:
        def door(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            return in_our_shape(view(request, *args, **kwargs))

    door.login_required = False
    door.csrf_exempt = True  # a token needs no CSRF check; a session's is made by PanelAuth
    return door


def urlpatterns() -> list[URLPattern]:
    patterns = api.urls[0]
    for pattern in patterns:
        pattern.callback = index if pattern.name == "api-root" else scripts_door(pattern.callback)
    return [*patterns, re_path(r"^(?P<rest>[\s\S]*)$", no_such_path)]  # last: what matched nothing above


def index(request: HttpRequest) -> HttpResponse:
    """/api/ itself: where its description is (ninja's own answers an HTML 404)."""
    return JsonResponse({"schema": reverse("api:openapi-json"), "docs": reverse("api:openapi-view")})


index.login_required = False
