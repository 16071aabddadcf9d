"""/v1/: the OpenAI-compatible API (no trailing slashes: OpenAI clients add none)."""

from django.urls import path

from jobs.api import openai_views

urlpatterns = [
    path("models", openai_views.models, name="openai-models"),
    path("chat/completions", openai_views.chat_completions, name="openai-chat"),
    path("completions", openai_views.completions, name="openai-completions"),
]
