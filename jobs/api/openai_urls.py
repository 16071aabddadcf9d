"""/v1/: the OpenAI-compatible API (no trailing slashes: OpenAI clients add none). Every answer is JSON in
OpenAI's error shape, a path that names nothing too."""

from django.urls import path, re_path

from jobs.api import anthropic_views, openai_batches, openai_views, responses_views

urlpatterns = [
    path("models", openai_views.models, name="openai-models"),
    path("chat/completions", openai_views.chat_completions, name="openai-chat"),
    path("completions", openai_views.completions, name="openai-completions"),
    path("embeddings", openai_views.embeddings_view, name="openai-embeddings"),
    path("files", openai_batches.file_list, name="openai-files"),
    path("files/<str:file_id>", openai_batches.file_detail, name="openai-file"),
    path("files/<str:file_id>/content", openai_batches.file_content, name="openai-file-content"),
    path("batches", openai_batches.batch_list, name="openai-batches"),
    path("batches/<str:batch_id>", openai_batches.batch_detail, name="openai-batch"),
    path("batches/<str:batch_id>/cancel", openai_batches.batch_cancel, name="openai-batch-cancel"),
    path("responses", responses_views.responses, name="openai-responses"),
    path("responses/<str:response_id>", responses_views.response_detail, name="openai-response"),
    path("messages", anthropic_views.messages, name="anthropic-messages"),
    path("messages/count_tokens", anthropic_views.count_tokens, name="anthropic-count-tokens"),
    re_path(r"^(?P<rest>[\s\S]*)$", openai_views.no_such_path, name="openai-unknown"),  # last: what matched nothing
]
