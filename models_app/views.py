from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from clusterpanel.auth import lab_admin_required
from models_app.forms import RegisterPathForm
from models_app.gguf_meta import ModelMetadata, bytes_by_kind
from models_app.library import LibraryError, register_path
from models_app.models import GgufModel, Upload


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
    return render(request, "models_app/list.html", {
        "models": GgufModel.objects.all(), "form": form, "upload_limit": settings.UPLOAD_MAX_BYTES,
        "unfinished": Upload.objects.filter(owner=request.user)})


@lab_admin_required
def model_detail(request: HttpRequest, name: str) -> HttpResponse:
    model = get_object_or_404(GgufModel, name=name)
    meta = ModelMetadata(**{f: getattr(model, f) for f in ("architecture", "n_layer", "n_embd", "n_head",
                                                           "n_head_kv", "context_length", "vocab_size",
                                                           "file_type", "layer_bytes", "other_tensors")},
                         name=model.title, file_size=model.size)
    chart = {"layers": model.layer_bytes, "other": bytes_by_kind(meta)}
    return render(request, "models_app/detail.html", {"model": model, "chart": chart,
                                                       "deployments": model.deployments.all()[:20],
                                                       "other": bytes_by_kind(meta)})
