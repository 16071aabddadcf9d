"""A model's page: its shape, its layers' sizes, its deployments, and its on-call card (models_app/pages/oncall_card.py
saves that card's form)."""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from models_app.gguf.meta import ModelMetadata, bytes_by_kind, pooling_said
from models_app.models import GgufModel, OnCall
from models_app.oncall import service as oncall
from models_app.pages.forms import OnCallForm

EVENTS_SHOWN = 30


def model_page(request: HttpRequest, model: GgufModel, on_call_form=None, status: int = 200) -> HttpResponse:
    meta = ModelMetadata(**{f: getattr(model, f) for f in ("architecture", "n_layer", "n_embd", "n_head",
                                                           "n_head_kv", "context_length", "vocab_size",
                                                           "file_type", "layer_bytes", "other_tensors")},
                         name=model.title, file_size=model.size)
    chart = {"layers": model.layer_bytes, "other": bytes_by_kind(meta)}
    return render(request, "models_app/detail.html", {"model": model, "chart": chart,
                                                       "deployments": model.deployments.all()[:20],
                                                       "other": bytes_by_kind(meta),
                                                       "embeddings_made": pooling_said(model.pooling),
                                                       **on_call_card(model, on_call_form)}, status=status)


def on_call_card(model: GgufModel, form: OnCallForm | None = None) -> dict:
    """What the model's page shows of it on call."""
    on_call = OnCall.objects.filter(model=model).first()
    return {"on_call": on_call, "on_call_state": oncall.state_of(model), "on_call_form": form or OnCallForm.of(on_call),
            "on_call_events": model.on_call_events.select_related("deployment")[:EVENTS_SHOWN]}
