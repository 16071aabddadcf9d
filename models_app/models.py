import uuid
from pathlib import Path

from django.conf import settings
from django.core.validators import MaxValueValidator
from django.db import models

from clusterpanel.kit.url_names import NotARoute
from models_app.gguf import quantization
from models_app.gguf.meta import ModelMetadata
from nodes.models import NodeStatus


class ModelStatus(models.TextChoices):
    HASHING = "hashing", "Checksumming"
    READY = "ready", "Ready"
    FAILED = "failed", "Failed"


class GgufModel(models.Model):
    """A GGUF file on the panel's machine that can be deployed across laptops."""

    # A name that is also a page's (/models/plan/) would give the model a page nobody can reach.
    name = models.SlugField(max_length=80, unique=True, validators=[NotARoute("models")])
    title = models.CharField(max_length=200, blank=True)
    path = models.CharField(max_length=1000, unique=True)
    size = models.BigIntegerField()
    sha256 = models.CharField(max_length=64, blank=True)
    hash_progress = models.FloatField(default=0.0)
    status = models.CharField(max_length=10, choices=ModelStatus.choices, default=ModelStatus.HASHING)
    status_detail = models.TextField(blank=True)
    bundled = models.BooleanField(default=False)
    architecture = models.CharField(max_length=40)
    n_layer = models.PositiveIntegerField()
    n_embd = models.PositiveIntegerField()
    n_head = models.PositiveIntegerField()
    n_head_kv = models.PositiveIntegerField()
    n_ff = models.PositiveIntegerField(default=0, help_text="Feed-forward width; 0 if the file does not say.")
    context_length = models.PositiveIntegerField()
    # llama.cpp's pooling type (0: none, 1 mean, 2 CLS, 3 last): how its vectors are made (jobs/engine/embedding.py).
    pooling = models.PositiveSmallIntegerField(default=0)
    vocab_size = models.PositiveIntegerField()
    file_type = models.CharField(max_length=40)
    layer_bytes = models.JSONField(default=list)
    other_tensors = models.JSONField(default=dict)
    # {"file": {size, mtime_ns}, "tensors": {name: {hash, offset, size}}} (models_app/deploying/tensor_cache.py);
    # null until computed, which models registered before this field get on their first pre-seeded deployment.
    tensor_hashes = models.JSONField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @classmethod
    def from_metadata(cls, name: str, path: str, meta: ModelMetadata, bundled: bool = False) -> "GgufModel":
        fields = {k: v for k, v in meta.as_dict().items() if k not in ("name", "file_size")}
        return cls(name=name, title=meta.name, path=path, size=meta.file_size, bundled=bundled, **fields)

    @property
    def weights_bytes(self) -> int:
        return sum(self.layer_bytes) + sum(self.other_tensors.values())

    @property
    def quantization(self) -> str:
        return quantization.described(self.file_type)


class DeploymentStatus(models.TextChoices):
    PLANNED = "planned", "Planned"
    PREPARING = "preparing", "Preparing"
    LOADING = "loading", "Loading"
    READY = "ready", "Ready"
    DEGRADED = "degraded", "Degraded"
    FAILED = "failed", "Failed"
    STOPPED = "stopped", "Stopped"


MAX_DRAFT_TOKENS = 32  # drafted tokens a sequence's step may carry: past a few, a wrong guess costs more than it saves


class Deployment(models.Model):
    """A model split across the head and an ordered list of laptops, following one plan."""

    ACTIVE = (DeploymentStatus.PREPARING, DeploymentStatus.LOADING, DeploymentStatus.READY, DeploymentStatus.DEGRADED)

    model = models.ForeignKey(GgufModel, on_delete=models.PROTECT, related_name="deployments")
    ctx = models.PositiveIntegerField()
    mode = models.CharField(max_length=10, default="fastest")
    slots = models.PositiveSmallIntegerField(
        default=1, help_text="How many requests its engine serves at once, each with up to `ctx` tokens of its own.")
    plan = models.JSONField()
    status = models.CharField(max_length=10, choices=DeploymentStatus.choices, default=DeploymentStatus.PLANNED)
    status_detail = models.TextField(blank=True)
    preseed = models.BooleanField(default=True, help_text="Copy each laptop's cached tensors over SSH before the load.")
    created_by = models.ForeignKey("clusterpanel.User", null=True, blank=True, on_delete=models.SET_NULL)
    created = models.DateTimeField(auto_now_add=True)
    revision = models.PositiveIntegerField(default=1, help_text="Goes up with each re-plan; its engine restarts.")
    is_default = models.BooleanField(default=False, help_text="Offered first on the chat page.")
    engine = models.JSONField(default=dict, blank=True)  # the engine's state: loading progress, servers' pids
    verification = models.JSONField(default=dict, blank=True)  # the last "verify": distributed vs head-only
    # The process preparing it ("<machine>:<pid>:<start time>", models_app/deploying/deploy.py): one that is gone
    # left it preparing or loading for good, and a worker starting on that machine ends it.
    preparing_by = models.CharField(max_length=200, blank=True)
    # Made by the on-call scheduler (models_app/oncall/service.py), not by an admin: stopped when idle, evictable.
    on_call = models.BooleanField(default=False)
    draft_tokens = models.PositiveSmallIntegerField(
        default=0, validators=[MaxValueValidator(MAX_DRAFT_TOKENS)],
        help_text="Speculative decoding: the most tokens an answer drafts per step (by n-grams, or by draft_model), "
                  "which one step through the pipeline then checks together (0: none). Its engine takes a change at "
                  "once.")
    draft_model = models.ForeignKey(
        GgufModel, null=True, blank=True, on_delete=models.SET_NULL, related_name="drafting_for",
        help_text="A small model with the same vocabulary that drafts on the head instead of n-grams, when "
                  "drafting is on.")

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.model} #{self.pk}"

    @property
    def model_ids(self) -> list[str]:
        """The names the OpenAI-compatible API knows it by: its model's, or `deployment-<id>`."""
        return [self.model.name, f"deployment-{self.pk}"]

    @property
    def is_active(self) -> bool:
        """Holding laptops: preparing, loading, ready or degraded."""
        return self.status in self.ACTIVE

    @property
    def queue(self) -> str:
        """The Celery queue its engine worker takes jobs from."""
        return f"engine.{self.pk}"

    def offline_laptops(self) -> list[str]:
        """Its laptops the metrics collector sees offline (asleep, frozen, off the network): until they are back
        its engine cannot answer, though nothing has failed yet that recovery would act on."""
        return list(self.stages.filter(node__status=NodeStatus.OFFLINE).values_list("node__name", flat=True))

    def set_status(self, status: str, detail: str = "") -> None:
        """Record and announce a new state. Stopped is final: what fails after a stop (an engine losing the
        laptops the stop let go, recovery giving up) follows from it, and must not turn it into "Failed"."""
        from clusterpanel.kit.broadcast import broadcast

        rows = Deployment.objects.filter(pk=self.pk)
        if status != DeploymentStatus.STOPPED:
            rows = rows.exclude(status=DeploymentStatus.STOPPED)
        if not rows.update(status=status, status_detail=detail):
            self.refresh_from_db(fields=["status", "status_detail"])
            return
        self.status, self.status_detail = status, detail
        broadcast(f"deployment_{self.pk}", "deployment.status",
                  {"status": status, "label": self.get_status_display(), "detail": detail})


class DeploymentStage(models.Model):
    """One laptop's part of a deployment: its run of layers, its memory, its rpc-server."""

    deployment = models.ForeignKey(Deployment, on_delete=models.CASCADE, related_name="stages")
    position = models.PositiveSmallIntegerField()
    node = models.ForeignKey("nodes.Node", on_delete=models.PROTECT, related_name="stages")
    first_layer = models.PositiveIntegerField()
    layer_count = models.PositiveIntegerField()
    memory = models.JSONField()
    server = models.OneToOneField("nodes.RpcServer", null=True, blank=True, on_delete=models.SET_NULL,
                                  related_name="stage")
    preseed = models.JSONField(default=dict, blank=True)  # the cache copy's progress and outcome
    # The laptop's devices holding its layers, in the order its rpc-server serves them (-d): [{"device": "Vulkan0",
    # "first": 0, "count": 9, "memory": {...}}, ...]; empty for a stage planned before devices (its CPU alone).
    devices = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["position"]
        constraints = [models.UniqueConstraint(fields=["deployment", "node"], name="a_laptop_once_per_deployment")]

    def layers_held(self) -> str:
        """'layers 0–9', 'layer 4', 'layers 21–29 and the output layer' (llama.cpp's layer n_layer)."""
        last, output = self.first_layer + self.layer_count - 1, self.deployment.model.n_layer
        if not self.layer_count:
            return "no layers"
        if last != output:
            return f"layers {self.first_layer}–{last}" if self.layer_count > 1 else f"layer {self.first_layer}"
        if self.layer_count == 1:
            return "the output layer"
        before = f"layers {self.first_layer}–{last - 1}" if self.layer_count > 2 else f"layer {self.first_layer}"
        return f"{before} and the output layer"


class Upload(models.Model):
    """A GGUF file arriving from a browser in chunks. The part file's length is the truth about what
    arrived; `received` mirrors it for pages. The row goes once the file is registered or refused."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey("clusterpanel.User", on_delete=models.CASCADE, related_name="uploads")
    name = models.CharField(max_length=255)  # the browser's file name: shown, never used as a path
    modified = models.BigIntegerField()  # the browser's lastModified (ms): with name and size, the same file again
    model_name = models.SlugField(max_length=80, unique=True)  # reserved until the upload ends
    size = models.BigIntegerField()
    received = models.BigIntegerField(default=0)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated"]

    def __str__(self) -> str:
        return self.name

    @property
    def part_path(self) -> Path:
        return Path(settings.UPLOAD_DIR) / f"{self.pk}.part"


class WhenShort(models.TextChoices):
    WAIT = "wait", "Wait for an idle deployment to be unloaded"
    EVICT = "evict", "Evict the least recently used idle deployment"


class OnCall(models.Model):
    """A model loaded when a request names it and unloaded when idle (models_app/oncall/service.py)."""

    model = models.OneToOneField(GgufModel, on_delete=models.CASCADE, related_name="on_call")
    any_laptop = models.BooleanField(default=True, help_text="Its pool is every ready laptop.")
    pool = models.ManyToManyField("nodes.Node", blank=True, related_name="on_call_pools")
    idle_minutes = models.PositiveIntegerField(default=15)
    replicas = models.PositiveSmallIntegerField(default=1)
    ctx = models.PositiveIntegerField(default=2048)
    slots = models.PositiveSmallIntegerField(default=1)
    when_short = models.CharField(max_length=5, choices=WhenShort.choices, default=WhenShort.WAIT)
    draft_tokens = models.PositiveSmallIntegerField(default=0, validators=[MaxValueValidator(MAX_DRAFT_TOKENS)])
    draft_model = models.ForeignKey(GgufModel, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="drafting_on_call")  # drafts as Deployment.draft_model does
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.model} on call"


class OnCallEventKind(models.TextChoices):
    LOAD = "load", "Load"
    LOADED = "loaded", "Loaded"
    FAILED = "failed", "Load failed"
    WAIT = "wait", "Waiting for laptops"
    UNLOAD = "unload", "Unloaded"
    EVICT = "evict", "Evicted"


class OnCallEvent(models.Model):
    """When and why the scheduler loaded or unloaded an on-call model: shown to admins on the model's page."""

    model = models.ForeignKey(GgufModel, on_delete=models.CASCADE, related_name="on_call_events")
    deployment = models.ForeignKey(Deployment, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="on_call_events")
    kind = models.CharField(max_length=8, choices=OnCallEventKind.choices)
    why = models.TextField()
    at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-at", "-pk"]

    def __str__(self) -> str:
        return f"{self.model} {self.kind} at {self.at:%H:%M:%S}"
