"""/ollama/: Ollama's API (give Ollama clients http://<panel>/ollama as their host). Every answer is JSON in
Ollama's error shape, a path that names nothing too."""

from django.urls import path, re_path

from jobs.api import ollama_views

urlpatterns = [
    path("", ollama_views.running, name="ollama-root"),
    path("api/chat", ollama_views.chat, name="ollama-chat"),
    path("api/generate", ollama_views.generate, name="ollama-generate"),
    path("api/embed", ollama_views.embed, name="ollama-embed"),
    path("api/embeddings", ollama_views.embeddings_legacy, name="ollama-embeddings"),
    path("api/tags", ollama_views.tags, name="ollama-tags"),
    path("api/show", ollama_views.show, name="ollama-show"),
    path("api/ps", ollama_views.ps, name="ollama-ps"),
    path("api/version", ollama_views.version, name="ollama-version"),
    re_path(r"^(?P<rest>[\s\S]*)$", ollama_views.no_such_path, name="ollama-unknown"),
]
