"""Jobs for the engine (chat, completion, embedding, batch items), conversations, and batches.

The database is the truth about a job: queue messages only wake the engine up,
and the engine claims a job atomically before running it, so a message delivered
twice runs nothing twice and a message lost is found again (jobs/queue/queueing.py).
"""

import secrets
from bisect import bisect_left
from datetime import UTC, date, datetime

from django.conf import settings
from django.db import models
from django.utils import timezone

from models_app.models import Deployment, DeploymentStatus


class JobStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


class JobKind(models.TextChoices):
    CHAT = "chat", "Chat"
    COMPLETION = "completion", "Completion"
    BATCH_ITEM = "batch_item", "Batch item"
    EMBEDDING = "embedding", "Embedding"


FINISHED = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED)
STOPPED = "Stopped:"  # how the error of a job failed by a laptop's death begins (jobs/engine/recovery.py)
NOT_RETRIED = "Not retried."  # and what recovery adds to it when no retry will come


# A deployment's states while recovery may still retry its jobs (ready: brought back, the retries on their way).
RECOVERING = (DeploymentStatus.DEGRADED, DeploymentStatus.PREPARING, DeploymentStatus.LOADING, DeploymentStatus.READY)


def awaiting_retry() -> models.Q:
    """Jobs failed by a laptop's death whose recovery has not yet said whether a retry comes (the retry, once
    made, replaces them: a job's `retry` is then set). Once their deployment stopped, failed or went, none
    comes, whatever recovery managed to write."""
    return (models.Q(status=JobStatus.FAILED, error__startswith=STOPPED, deployment__status__in=RECOVERING)
            & ~models.Q(error__contains=NOT_RETRIED))


class Conversation(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations")
    deployment = models.ForeignKey("models_app.Deployment", null=True, blank=True, on_delete=models.SET_NULL)
    title = models.CharField(max_length=200, blank=True)
    system_prompt = models.TextField(blank=True)
    params = models.JSONField(default=dict, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated"]
        constraints = [models.UniqueConstraint(fields=["user", "title"], condition=~models.Q(title=""),
                                               name="one_title_per_conversation")]

    def __str__(self) -> str:
        return self.title or f"Conversation {self.pk}"


class Batch(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="batches")
    # A batch and its results outlive a removed deployment (null then): they are the user's.
    deployment = models.ForeignKey("models_app.Deployment", null=True, on_delete=models.SET_NULL,
                                   related_name="batches")
    name = models.CharField(max_length=200)
    input_format = models.CharField(max_length=10)  # "jsonl" (OpenAI Batch) or "csv"
    rejected = models.JSONField(default=list, blank=True)  # [{"line": n, "reason": "..."}]
    created = models.DateTimeField(auto_now_add=True)
    cancelled = models.DateTimeField(null=True, blank=True)  # "cancel remaining": no item starts, or is retried, after
    # As OpenAI's Batches API knows it (jobs/api/openai_batches.py); a batch made on the page has them too.
    endpoint = models.CharField(max_length=40, default="/v1/chat/completions")
    input_file_id = models.CharField(max_length=40, blank=True, help_text="The ApiFile it was made from.")
    metadata = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created"]


def new_file_id() -> str:
    return f"file-{secrets.token_hex(12)}"


class ApiFile(models.Model):
    """A file as OpenAI's Files API knows it: a batch's input (sent by a script, or with a batch on the page),
    or a finished batch's output or errors, written once it has finished."""

    public_id = models.CharField(max_length=40, unique=True, default=new_file_id)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_files")
    purpose = models.CharField(max_length=20)  # "batch" (an input) or "batch_output"
    filename = models.CharField(max_length=200)
    content = models.BinaryField()
    size = models.BigIntegerField()
    batch = models.ForeignKey(Batch, null=True, blank=True, on_delete=models.CASCADE, related_name="files")
    kind = models.CharField(max_length=10, blank=True)  # a batch's "output" or "error" file
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created", "-pk"]
        constraints = [models.UniqueConstraint(fields=["batch", "kind"], condition=models.Q(batch__isnull=False),
                                               name="one_file_of_each_kind_per_batch")]

    def __str__(self) -> str:
        return self.public_id


class Job(models.Model):
    kind = models.CharField(max_length=12, choices=JobKind.choices)
    deployment = models.ForeignKey("models_app.Deployment", null=True, on_delete=models.SET_NULL,
                                   related_name="jobs")  # null: a finished job of a deployment since removed
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    # The API token it was asked with (None: the chat page, a batch made on its page, the panel itself): its
    # limits hold for it too (jobs/queue/admission.py).
    api_token = models.ForeignKey("clusterpanel.ApiToken", null=True, blank=True, on_delete=models.SET_NULL,
                                  related_name="jobs")
    messages = models.JSONField(default=list, blank=True)  # chat: [{"role": ..., "content": ...}]
    prompt = models.TextField(blank=True)  # completion
    params = models.JSONField(default=dict, blank=True)  # validated by jobs/params.py
    status = models.CharField(max_length=10, choices=JobStatus.choices, default=JobStatus.QUEUED, db_index=True)
    error = models.TextField(blank=True)
    output = models.TextField(blank=True)
    # The calls a tool-using answer made, in OpenAI's shape (jobs/engine/toolcalls.py); `output` is its content.
    tool_calls = models.JSONField(default=list, blank=True)
    # Asked for (`logprobs`): each answer token's log probability and its likeliest others (jobs/engine/logprobs.py).
    logprobs = models.JSONField(null=True, blank=True)
    # An embedding job's texts (or token lists), and their vectors: base64 of little-endian float32, one per input
    # (jobs/engine/embedding.py), read from here rather than sent as events: a batch of them runs to megabytes.
    inputs = models.JSONField(default=list, blank=True)
    embeddings = models.JSONField(null=True, blank=True)
    finish_reason = models.CharField(max_length=20, blank=True)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    created = models.DateTimeField(default=timezone.now, db_index=True)
    started = models.DateTimeField(null=True, blank=True)
    first_token = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)
    # Seconds, written with the end (jobs/engine/child.py), which adds them to the deployment's Tally too.
    time_to_first_token_s = models.FloatField(null=True, blank=True)
    duration_s = models.FloatField(null=True, blank=True)
    prompt_seconds = models.FloatField(null=True, blank=True)  # reading the prompt: joining the batch to first token
    # Prompt tokens the engine found already read (a conversation's earlier turns) and did not read again.
    cached_tokens = models.PositiveIntegerField(default=0)
    # Speculative decoding: answer tokens drafted for it, and how many of those the model kept.
    drafted_tokens = models.PositiveIntegerField(default=0)
    accepted_tokens = models.PositiveIntegerField(default=0)
    # A conversation's oldest messages the model did not see: they no longer fit in the deployment's context.
    dropped_messages = models.PositiveIntegerField(default=0)
    attempts = models.PositiveSmallIntegerField(default=0)
    retry_of = models.OneToOneField("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="retry")
    conversation = models.ForeignKey(Conversation, null=True, blank=True, on_delete=models.CASCADE,
                                     related_name="jobs")
    batch = models.ForeignKey(Batch, null=True, blank=True, on_delete=models.CASCADE, related_name="items")
    line = models.PositiveIntegerField(null=True, blank=True)  # the batch file's line
    custom_id = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["created", "pk"]
        indexes = [models.Index(fields=["deployment", "status", "created"]),
                   models.Index(fields=["deployment", "status", "batch", "created"]),  # queueing.ORDER
                   models.Index(fields=["user", "status"]), models.Index(fields=["api_token", "status"])]  # admission

    def __str__(self) -> str:
        return f"job {self.pk} ({self.kind}, {self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status in FINISHED

    def timings(self) -> dict:
        """Queue wait, time to first token, prompt and generation speed, total: seconds and tokens/s."""
        def seconds(a, b):
            return (b - a).total_seconds() if a and b else None

        generating = seconds(self.first_token, self.finished)
        return {
            "queue_wait_s": seconds(self.created, self.started),
            "time_to_first_token_s": seconds(self.started, self.first_token),
            "prompt_tokens_per_s": (self.prompt_tokens / self.prompt_seconds
                                    if self.prompt_tokens and self.prompt_seconds else None),
            "tokens_per_s": ((self.completion_tokens - 1) / generating
                             if self.completion_tokens and self.completion_tokens > 1 and generating else None),
            "total_s": seconds(self.created, self.finished),
            "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
            "cached_tokens": self.cached_tokens, "drafted_tokens": self.drafted_tokens,
            "accepted_tokens": self.accepted_tokens,
        }

    def seconds_to(self, finished, first_token) -> dict:
        """Its time to its first token and its whole time, from its start: what /metrics' histograms count."""
        if self.started is None:
            return {}
        return {"duration_s": (finished - self.started).total_seconds(),
                "time_to_first_token_s": (first_token - self.started).total_seconds() if first_token else None}

    @property
    def is_completion(self) -> bool:
        """A prompt to continue (/v1/completions, or such a batch line) rather than a chat."""
        return self.kind == JobKind.COMPLETION or (self.kind == JobKind.BATCH_ITEM and bool(self.prompt)
                                                   and not self.messages)

    @property
    def is_embedding(self) -> bool:
        """Texts to turn into vectors (/v1/embeddings, or such a batch line) rather than an answer to generate."""
        return self.kind == JobKind.EMBEDDING or (self.kind == JobKind.BATCH_ITEM and bool(self.inputs))

    def summary(self) -> dict:
        return {"id": self.pk, "kind": self.kind, "status": self.status, "error": self.error,
                "output": self.output, "tool_calls": self.tool_calls, "logprobs": self.logprobs,
                "finish_reason": self.finish_reason,
                "deployment": self.deployment_id,
                "retry": getattr(self, "retry", None) and self.retry.pk, "timings": self.timings(),
                "dropped_messages": self.dropped_messages}


HISTOGRAM_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)  # seconds, for /metrics
TALLIED_SECONDS = ("time_to_first_token_s", "duration_s")


class Tally(models.Model):
    """What a deployment's ended jobs add up to, for /metrics' counters and histograms (jobs/prometheus.py).
    Added to in the transaction that ends each job and never recomputed: deleting a conversation or a batch
    takes its jobs but not what they counted, so no counter goes down (Prometheus would read that as a
    restart and show a spike)."""

    deployment = models.ForeignKey("models_app.Deployment", on_delete=models.CASCADE, related_name="tallies")
    name = models.CharField(max_length=32)  # "tokens", or one of TALLIED_SECONDS
    # A histogram's bucket: its values up to HISTOGRAM_BUCKETS[bucket]; len(HISTOGRAM_BUCKETS) is +Inf.
    bucket = models.PositiveSmallIntegerField(default=0)
    count = models.BigIntegerField(default=0)
    total = models.FloatField(default=0.0)  # the +Inf bucket's: the sum of the values

    class Meta:
        constraints = [models.UniqueConstraint(fields=["deployment", "name", "bucket"], name="one_tally_per_bucket")]

    @classmethod
    def count_ended(cls, deployment_id: int, tokens: int | None, seconds: dict[str, float | None]) -> None:
        """Add an ended job. Increments in the database (no read, then write), so jobs ending at once on
        several engines all count."""
        mine = cls.objects.filter(deployment_id=deployment_id)
        if not mine.filter(name="tokens").exists():
            rows = [("tokens", 0)] + [(name, bucket) for name in TALLIED_SECONDS
                                      for bucket in range(len(HISTOGRAM_BUCKETS) + 1)]
            cls.objects.bulk_create([cls(deployment_id=deployment_id, name=name, bucket=bucket)
                                     for name, bucket in rows], ignore_conflicts=True)
        if tokens:
            mine.filter(name="tokens").update(count=models.F("count") + tokens)
        for name in TALLIED_SECONDS:
            value = seconds.get(name)
            if value is None:
                continue
            first = bisect_left(HISTOGRAM_BUCKETS, value)  # the buckets whose bound is at least the value
            mine.filter(name=name, bucket__gte=first).update(count=models.F("count") + 1)
            mine.filter(name=name, bucket=len(HISTOGRAM_BUCKETS)).update(total=models.F("total") + value)


def utc_today() -> date:
    return datetime.now(UTC).date()


class Usage(models.Model):
    """Tokens spent, per UTC day, person, API token and model: what ended jobs wrote as their prompt and answer
    tokens, added in the transaction that ends each one (ending.tally) and never recomputed. The usage page and
    /api/usage/ read it, the tokens-per-day limit counts today's, /metrics sums it per person. Deleting a
    conversation or a batch takes its jobs but not what they spent: nobody gets a day's tokens back that way.
    Two jobs ending at the same instant may each start the day's row; every reader sums, so both count."""

    day = models.DateField()
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="usage")
    api_token = models.ForeignKey("clusterpanel.ApiToken", null=True, on_delete=models.SET_NULL,
                                  related_name="usage")
    model = models.CharField(max_length=200, blank=True)  # the model's name when the job ended
    prompt_tokens = models.BigIntegerField(default=0)
    completion_tokens = models.BigIntegerField(default=0)
    jobs = models.PositiveIntegerField(default=0)

    class Meta:
        indexes = [models.Index(fields=["user", "day"]), models.Index(fields=["api_token", "day"]),
                   models.Index(fields=["day"])]

    @classmethod
    def add(cls, job: Job, prompt_tokens: int | None, completion_tokens: int | None) -> None:
        """Count what an ended job spent (nothing, when it spent nothing: cancelled before it ran)."""
        prompt, completion = prompt_tokens or 0, completion_tokens or 0
        if not prompt and not completion:
            return
        model = Deployment.objects.filter(pk=job.deployment_id).values_list("model__name", flat=True).first()
        key = {"day": utc_today(), "user_id": job.user_id, "api_token_id": job.api_token_id, "model": model or ""}
        if not cls.objects.filter(**key).update(prompt_tokens=models.F("prompt_tokens") + prompt,
                                                completion_tokens=models.F("completion_tokens") + completion,
                                                jobs=models.F("jobs") + 1):
            cls.objects.create(**key, prompt_tokens=prompt, completion_tokens=completion, jobs=1)

    @classmethod
    def spent_today(cls, **whose) -> int:
        """Tokens spent today (UTC) by `user=` or `api_token=`."""
        total = cls.objects.filter(day=utc_today(), **whose).aggregate(
            n=models.Sum(models.F("prompt_tokens") + models.F("completion_tokens")))["n"]
        return total or 0
