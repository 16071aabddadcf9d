"""Batch pages: upload a file, follow its progress, cancel what is left, download the results."""

from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from clusterpanel.kit import confirm
from jobs.batches import output
from jobs.batches import service as batches
from jobs.batches.batchfile import FileRefused
from jobs.batches.forms import BatchUploadForm
from jobs.models import Batch
from jobs.queue.queueing import QueueError

SHOWN_REJECTED = 200


def batch_list(request: HttpRequest) -> HttpResponse:
    form = BatchUploadForm(request.POST or None, request.FILES or None)
    rejected = []
    if request.method == "POST" and form.is_valid():
        upload, deployment = form.cleaned_data["file"], form.cleaned_data["deployment"]
        try:
            batch = batches.from_file(request.user, deployment, upload.name, upload.read())
        except FileRefused as exc:
            form.add_error("file", str(exc))
            rejected = exc.rejected
        except QueueError as exc:
            form.add_error("deployment", str(exc))
        else:
            messages.success(request, queued_message(batch.items.count(), len(batch.rejected)))
            return redirect("batches:detail", pk=batch.pk)
    return render(request, "jobs/batches.html", {
        "form": form, "batches": batches.visible(request.user)[:50], "rejected": rejected[:SHOWN_REJECTED],
        "more_rejected": max(len(rejected) - SHOWN_REJECTED, 0), "max_lines": settings.BATCH_MAX_LINES,
        "max_bytes": settings.BATCH_MAX_BYTES}, status=400 if form.errors else 200)


def queued_message(queued: int, rejected: int) -> str:
    message = f"{queued} request{pluralize(queued)} queued"
    return f"{message}, {rejected} line{pluralize(rejected)} rejected." if rejected else f"{message}."


def batch_for(request: HttpRequest, pk: int) -> Batch:
    batch = batches.own(request.user, pk)
    if batch is None:
        raise Http404("No such batch.")
    return batch


def batch_page(request: HttpRequest, pk: int) -> HttpResponse:
    batch = batch_for(request, pk)
    counts = batches.counts(batch)
    return render(request, "jobs/batch.html", {
        "batch": batch, "counts": counts, "count_rows": [(status, counts[status]) for status in batches.COUNTED],
        "held": batches.held(batch, counts),
        "rejected": batch.rejected[:SHOWN_REJECTED],
        "more_rejected": max(len(batch.rejected) - SHOWN_REJECTED, 0)})


@require_POST
def cancel_batch(request: HttpRequest, pk: int) -> HttpResponse:
    stopped = batches.cancel_remaining(batch_for(request, pk))
    messages.success(request, f"{stopped} requests cancelled." if stopped else "Nothing was left to cancel.")
    return redirect("batches:detail", pk=pk)


@require_http_methods(["GET", "POST"])
def delete_batch(request: HttpRequest, pk: int) -> HttpResponse:
    batch = batch_for(request, pk)
    return confirm.ask_then_do(
        request, question=f"Delete batch #{batch.pk}?", back=reverse("batches:detail", args=[pk]), verb="Delete",
        check=lambda: batches.deletion(batch), act=lambda: batches.delete(batch),
        refusals=(batches.StillRunning,), done=f"Batch #{pk} deleted.", then=reverse("batches:list"))


def download(request: HttpRequest, pk: int, kind: str) -> HttpResponse:
    return output.download(batch_for(request, pk), kind)
