"""The REST API under /api/: one django-ninja API whose routers live with their apps. Validation, errors and
the OpenAPI 3.1 schema (/api/schema/) come from the same declarations; /api/docs/ browses it with assets the
panel serves itself (an offline lab has no CDN)."""

import inspect

from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse
from django.urls import URLPattern, re_path, reverse
from ninja import NinjaAPI

from clusterpanel.accounts.api.router import router as accounts
from clusterpanel.accounts.apiauth import PanelAuth
from clusterpanel.kit.apikit import SafeParser, install_error_handlers, no_such_path, problem
from jobs.api.router import router as jobs
from models_app.api.router import router as models
from nodes.api.router import router as nodes

# Where each API module's operations were first published: their operationIds (module_function) stay as
# scripts and generated clients know them, wherever the module lives now.
PUBLISHED_FROM = {
    "clusterpanel.accounts.api.tokens": "clusterpanel.token_api",
    "clusterpanel.accounts.api.limits": "clusterpanel.limit_api",
    "jobs.api.usage": "jobs.usage.api",
    "models_app.api.library": "models_app.api",
    "models_app.api.plans": "models_app.api",
    "models_app.api.deployments": "models_app.api_deployments",
    "models_app.api.oncall": "models_app.api_oncall",
    "models_app.api.uploads": "models_app.api_uploads",
    "nodes.api.laptops": "nodes.api",
    "nodes.api.actions": "nodes.api_actions",
    "nodes.api.bulk": "nodes.api_bulk",
    "nodes.api.scans": "nodes.api_scans",
}


class PanelApi(NinjaAPI):
    def get_openapi_operation_id(self, operation) -> str:
        module = operation.view_func.__module__
        return f"{PUBLISHED_FROM.get(module, module)}_{operation.view_func.__name__}".replace(".", "_")


api = PanelApi(
    title="clusterpanel", version="1", urls_namespace="api", auth=PanelAuth(), parser=SafeParser(),
    openapi_url="/schema/", docs_url="/docs/",
    description="Everything the panel's pages do, for scripts. Authenticate with `Authorization: Bearer "
                "<token>` (tokens at /account/tokens/; the Authorize button takes one), or a logged-in session. "
                "Errors are `{\"error\": sentence, \"field\": name or null}`.\n\n"
                "The model itself also answers at **/v1/**, the OpenAI-compatible API (models, chat completions, "
                "completions, files, batches): point any OpenAI client at `<panel>/v1` with a token as its API "
                "key. It follows OpenAI's own reference rather than this schema; docs/api.md describes both.")
install_error_handlers(api)
api.add_router("/", jobs)
api.add_router("/", models)
api.add_router("/nodes/", nodes)
api.add_router("/", accounts)


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
