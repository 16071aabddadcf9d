"""The on-call card of a model's page: its state, its settings (saved only when its pool can hold them), and when
and why it was loaded and unloaded."""

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from clusterpanel.accounts.auth import lab_admin_required
from models_app.models import GgufModel
from models_app.oncall import service as oncall
from models_app.pages.forms import OnCallForm
from models_app.pages.model_page import model_page


@lab_admin_required
@require_POST
def save(request: HttpRequest, name: str) -> HttpResponse:
    model = get_object_or_404(GgufModel, name=name)
    form = OnCallForm(request.POST)
    if form.is_valid():
        try:
            oncall.save(model, form.settings())
        except oncall.OnCallError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, str(exc))
        else:
            messages.success(request, f"{model.name} is on call: a request naming it loads it when it is asleep.")
            return redirect("models:detail", name=model.name)
    return model_page(request, model, form, status=400)


@lab_admin_required
@require_POST
def take_off(request: HttpRequest, name: str) -> HttpResponse:
    model = get_object_or_404(GgufModel, name=name)
    if oncall.take_off(model):
        messages.success(request, f"{model.name} is off call: requests no longer wake it. What is loaded now stays "
                                  "until stopped.")
    return redirect("models:detail", name=model.name)
