from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from clusterpanel.accounts.auth import lab_admin_required
from clusterpanel.kit import confirm
from models_app.deploying import jobs_above
from models_app.library import removal
from models_app.library.adding import LibraryError, register_path
from models_app.models import Deployment, GgufModel, OnCall, Upload
from models_app.oncall import service as oncall
from models_app.pages.forms import RegisterPathForm
from models_app.pages.model_page import model_page

MAX_LOOKED_UP = 256  # more than any engine's slots


@lab_admin_required
def model_list(request: HttpRequest) -> HttpResponse:
    form = RegisterPathForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            model = register_path(form.cleaned_data["path"], form.cleaned_data["name"])
        except LibraryError as exc:
            form.add_error("path", str(exc))
        else:
            messages.success(request, f"{model.name} added; its checksum is being computed.")
            return redirect("models:detail", name=model.name)
    models = list(GgufModel.objects.all())
    states, on_call = oncall.states(models), set(OnCall.objects.values_list("model_id", flat=True))
    for model in models:
        model.on_call_state = states[model.pk] if model.pk in on_call else ""
    return render(request, "models_app/list.html", {
        "models": models, "form": form, "upload_limit": settings.UPLOAD_MAX_BYTES,
        "unfinished": Upload.objects.filter(owner=request.user)})


@lab_admin_required
def model_detail(request: HttpRequest, name: str) -> HttpResponse:
    return model_page(request, get_object_or_404(GgufModel, name=name))


@lab_admin_required
def running_jobs(request: HttpRequest, pk: int) -> JsonResponse:
    """What the deployment page says of the jobs in its engine's slots (?ids=1,2): a label and the page to see
    each on, where there is one (a batch item's batch; a chat's conversation is its owner's alone)."""
    deployment = get_object_or_404(Deployment, pk=pk)
    ids = request.GET.get("ids", "").split(",")
    if not all(part.isascii() and part.isdigit() and len(part) <= 18 for part in ids) or len(ids) > MAX_LOOKED_UP:
        return JsonResponse({"error": f"ids must be up to {MAX_LOOKED_UP} job ids (whole numbers) separated by "
                                      "commas.", "field": "ids"}, status=400)
    return JsonResponse({"jobs": jobs_above.slot_jobs(deployment, [int(part) for part in ids])})


@lab_admin_required
@require_POST
def rename_model(request: HttpRequest, name: str) -> HttpResponse:
    model = get_object_or_404(GgufModel, name=name)
    try:
        removal.rename_model(model, request.POST.get("name", ""))
    except removal.Refused as exc:
        messages.error(request, str(exc))
        return redirect("models:detail", name=name)
    messages.success(request, f"Renamed to {model.name}; API clients now ask for it by that name.")
    return redirect("models:detail", name=model.name)


@lab_admin_required
@require_http_methods(["GET", "POST"])
def delete_model(request: HttpRequest, name: str) -> HttpResponse:
    model = get_object_or_404(GgufModel, name=name)
    return confirm.ask_then_do(
        request, question=f"Delete {model.name}?", back=reverse("models:detail", args=[name]), verb="Delete",
        check=lambda: removal.model_deletion(model), act=lambda: removal.delete_model(model),
        refusals=(removal.Refused,), done=f"{name} deleted.", then=reverse("models:list"))
