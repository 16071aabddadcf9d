import re

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.utils import timezone

from clusterpanel.kit.broadcast import broadcast
from clusterpanel.kit.crypto import EncryptedTextField
from clusterpanel.kit.url_names import NotARoute
from nodes.probing import power
from nodes.remote import logins, ssh

HOST_KEY_FORMAT = RegexValidator(r"^(ssh-ed25519|ecdsa-sha2-nistp\d+|ssh-rsa) [A-Za-z0-9+/=]+$",
                                 "Not an SSH public host key.")
FOLDER_PART = re.compile(r"[A-Za-z0-9_.+@][A-Za-z0-9_.+@-]*")


# The laptop's address, login and folder reach command lines (OpenSSH's, the laptop's shell): each is
# checked here, on the model, so the form, addnode and any API refuse the same values in the same words.
def validate_host(value: str) -> None:
    if problem := logins.host_problem(value):
        raise ValidationError(problem, code="invalid")


def validate_username(value: str) -> None:
    if problem := logins.user_problem(value):
        raise ValidationError(problem, code="invalid")


def validate_install_dir(value: str) -> None:
    """~, a folder under ~/, or an absolute path; no '..', and no part that could pass for an option."""
    head, _, rest = value.partition("/")
    parts = [part for part in rest.split("/") if part]
    rooted = head == "~" or (head == "" and bool(parts))
    if not rooted or not all(FOLDER_PART.fullmatch(part) and part != ".." for part in parts):
        raise ValidationError("Use a folder under ~/ or an absolute path, made of letters, digits and '._+@-', "
                              "without '..' and with no part starting with '-'.", code="invalid")


class PanelKey(models.Model):
    """The panel's own SSH identity: one ed25519 key pair, made on first use."""

    private_key = EncryptedTextField()
    public_key = models.TextField()
    created = models.DateTimeField(auto_now_add=True)

    @classmethod
    def get(cls) -> "PanelKey":
        existing = cls.objects.order_by("pk").first()
        if existing is not None:
            return existing
        private, public = ssh.generate_key_pair("clusterpanel")
        return cls.objects.create(private_key=private, public_key=public)


class NodeStatus(models.TextChoices):
    NEW = "new", "New"
    READY = "ready", "Ready"
    OFFLINE = "offline", "Offline"
    HOST_KEY_CHANGED = "host_key_changed", "Host key changed"
    LOGIN_REFUSED = "login_refused", "Login refused"


class Connection(models.TextChoices):
    TUNNEL = "tunnel", "SSH tunnel (rpc-server bound to the laptop's 127.0.0.1)"
    DIRECT = "direct", "Direct LAN (rpc-server open to the LAN, no authentication)"


class Node(models.Model):
    """A laptop the panel reaches over SSH."""

    name = models.SlugField(max_length=40, unique=True, validators=[NotARoute("nodes")])
    host = models.CharField(max_length=255, validators=[validate_host])
    port = models.PositiveIntegerField(default=22, validators=[MinValueValidator(1), MaxValueValidator(65535)])
    username = models.CharField(max_length=64, validators=[validate_username])
    install_dir = models.CharField(max_length=255, default="~/.clusterpanel", validators=[validate_install_dir])
    host_key = models.TextField(validators=[HOST_KEY_FORMAT])
    presented_host_key = models.TextField(blank=True, help_text="A different key the laptop showed, awaiting approval.")
    private_key = EncryptedTextField(blank=True, help_text="Empty: the panel's own key.")
    connection = models.CharField(max_length=10, choices=Connection.choices, default=Connection.TUNNEL)
    runtime = models.CharField(max_length=12, blank=True, help_text="Installed runtime bundle (sha256 prefix).")
    speed_gb_s = models.FloatField(null=True, blank=True, help_text="Effective memory bandwidth, measured.")
    speed_measured_at = models.DateTimeField(null=True, blank=True)
    device_speeds = models.JSONField(default=dict, blank=True, help_text=(
        "Effective bandwidth in GB/s of each device but the CPU (whose is speed_gb_s), by device name, measured."))
    devices_off = models.JSONField(default=list, blank=True, help_text=(
        "Names of the laptop's devices an admin keeps out of plans (e.g. a GPU that also drives the screen)."))
    memory_reserve = models.BigIntegerField(default=1 << 30, help_text="RAM kept free for the laptop's own use.")
    usable_memory = models.BigIntegerField(null=True, blank=True, help_text="Set by hand; overrides the measured.")
    pipeline_order = models.PositiveSmallIntegerField(
        default=0, validators=[MaxValueValidator(999)],
        help_text="Where the laptop goes in a pipeline: lower first, then by name. The plan page can reorder.")
    cache_cap = models.BigIntegerField(null=True, blank=True, help_text=(
        "Bytes the rpc cache and downloads may take on the laptop, set by hand; empty: a share of its disk "
        "(settings.CACHE_CAP_PERCENT, nodes/servers/cachecap.py)."))
    cache_state = models.JSONField(default=dict, blank=True, help_text=(
        "The cache as last listed (nodes/servers/cleaning.py): its size and cap, the disk's free space, what it holds "
        "per model, and what the last clean removed."))
    status = models.CharField(max_length=20, choices=NodeStatus.choices, default=NodeStatus.NEW)
    status_detail = models.TextField(blank=True)
    last_seen = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pipeline_order", "name"]

    def __str__(self) -> str:
        return self.name

    @property
    def host_key_fingerprint(self) -> str:
        return ssh.fingerprint(self.host_key)

    @property
    def presented_fingerprint(self) -> str:
        return ssh.fingerprint(self.presented_host_key) if self.presented_host_key else ""

    def usable_bytes(self) -> int | None:
        """RAM the planner may fill on this laptop: set by hand, else free (or cgroup-limited) minus the reserve."""
        if self.usable_memory:
            return self.usable_memory
        probe = self.probes.first()
        if probe is None:
            return None
        known = [x for x in (probe.facts.get("ram_available"), probe.facts.get("ram_limit")) if x]
        return max(min(known) - self.memory_reserve, 0) if known else None

    def power_flags(self, sample: dict | None = None) -> list[dict]:
        """What to warn about this laptop as a server: on battery, throttling, on Wi-Fi (nodes/probing/power.py), from
        its latest probe, `sample` (its newest 1 Hz sample) and its latest network check's round trip."""
        probe, link = self.probes.first(), self.link_checks.first()
        return power.flags(probe.facts if probe else None, sample, link.report.get("rtt_median_ms") if link else None)

    def ssh_target(self) -> ssh.SSHTarget:
        key = self.private_key or PanelKey.get().private_key
        return ssh.SSHTarget(self.host, self.username, self.host_key, self.port, private_key=key)

    def set_status(self, status: str, detail: str = "") -> None:
        self.status, self.status_detail = status, detail
        fields = ["status", "status_detail"]
        if status == NodeStatus.READY:
            self.last_seen = timezone.now()
            fields.append("last_seen")
        self.save(update_fields=fields)

    def refuse_host_key(self, presented: str) -> None:
        self.presented_host_key = presented
        self.save(update_fields=["presented_host_key"])
        self.set_status(NodeStatus.HOST_KEY_CHANGED,
                        f"The laptop now presents {ssh.fingerprint(presented)} instead of "
                        f"{self.host_key_fingerprint}. An admin must approve the new key.")

    def approve_host_key(self, key: str) -> None:
        HOST_KEY_FORMAT(key)
        self.host_key, self.presented_host_key = key, ""
        self.save(update_fields=["host_key", "presented_host_key"])
        self.set_status(NodeStatus.NEW, "New host key approved.")


class Probe(models.Model):
    """What the laptop said about itself, at one moment."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="probes")
    facts = models.JSONField()
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created"]
        get_latest_by = "created"


class ActionStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"


class ActionKind(models.TextChoices):
    PROBE = "probe", "Probe"
    INSTALL_RUNTIME = "install_runtime", "Install runtime"
    START_RPC = "start_rpc", "Start rpc-server"
    STOP_RPC = "stop_rpc", "Stop rpc-server"
    NETWORK_CHECK = "network_check", "Network check"
    MEASURE_SPEED = "measure_speed", "Measure speed"
    BUILD_RUNTIME = "build_runtime", "Build the runtime here"
    RESTART_RPC = "restart_rpc", "Restart rpc-servers"
    CLEAN_CACHE = "clean_cache", "Clean the cache now"
    REMOVE = "remove", "Remove"


def keep_removals(collector, field, sub_objs, using) -> None:
    """A laptop's removal records outlive it (their laptop set null), so whoever follows one still reads how it
    ended; its other actions go with it, as they always did."""
    models.SET_NULL(collector, field, sub_objs.filter(kind=ActionKind.REMOVE), using)
    models.CASCADE(collector, field, sub_objs.exclude(kind=ActionKind.REMOVE), using)


class NodeAction(models.Model):
    """One piece of work on a laptop: the single record of its state, progress and outcome."""

    TERMINAL = {ActionStatus.SUCCEEDED, ActionStatus.FAILED}

    node = models.ForeignKey(Node, null=True, on_delete=keep_removals, related_name="actions")
    node_name = models.CharField(max_length=40, blank=True, help_text=(
        "The laptop's name when the action was made (a removal's, once the laptop is gone)."))
    kind = models.CharField(max_length=20, choices=ActionKind.choices)
    status = models.CharField(max_length=10, choices=ActionStatus.choices, default=ActionStatus.QUEUED)
    progress = models.JSONField(default=dict, blank=True)
    message = models.TextField(blank=True)
    error = models.TextField(blank=True)
    requested_by = models.ForeignKey("clusterpanel.User", null=True, blank=True, on_delete=models.SET_NULL)
    created = models.DateTimeField(auto_now_add=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)
    claimed_by = models.CharField(max_length=200, blank=True, help_text="The Celery worker running it.")

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} on {self.laptop_name} ({self.status})"

    def save(self, *args, **kwargs) -> None:
        if not self.node_name and self.node_id:
            self.node_name = self.node.name
        super().save(*args, **kwargs)

    @property
    def laptop_name(self) -> str:
        """The laptop's name now, or the one it had when it was removed."""
        return self.node.name if self.node_id else self.node_name

    def claim(self, worker: str = "") -> bool:
        """Move QUEUED to RUNNING for `worker` (its Celery hostname); False when another worker already has it."""
        now = timezone.now()
        claimed = NodeAction.objects.filter(pk=self.pk, status=ActionStatus.QUEUED).update(
            status=ActionStatus.RUNNING, started=now, claimed_by=worker)
        if claimed:
            self.status, self.started, self.claimed_by = ActionStatus.RUNNING, now, worker
        return bool(claimed)

    def report(self, message: str = "", **progress) -> None:
        self.message = message or self.message
        self.progress = {**self.progress, **progress}
        self.save(update_fields=["message", "progress"])
        self.announce()

    def finish(self, status: str, error: str = "", was: str = ActionStatus.RUNNING) -> bool:
        """End it, if it is still `was` (a guarded update: an end, once written, never changes, so a worker
        thought dead cannot turn FAILED into SUCCEEDED, and writing the same end twice is harmless).
        False when it was no longer `was`."""
        now = timezone.now()
        if not NodeAction.objects.filter(pk=self.pk, status=was).update(status=status, error=error, finished=now):
            return False
        self.status, self.error, self.finished = status, error, now
        self.announce()
        return True

    def announce(self) -> None:
        broadcast(f"node_{self.node_id}", "node.action", self.payload())

    def payload(self) -> dict:
        return {"id": self.pk, "kind": self.kind, "status": self.status, "message": self.message,
                "error": self.error, "progress": self.progress}


class ServerStatus(models.TextChoices):
    STARTING = "starting", "Starting"
    RUNNING = "running", "Running"
    RESTARTING = "restarting", "Restarting"
    STOPPED = "stopped", "Stopped"
    FAILED = "failed", "Failed"


class RpcServer(models.Model):
    """One ggml-rpc-server on a laptop: what the admin wants, and what the supervisor last saw."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="rpc_servers")
    port = models.PositiveIntegerField(default=50052, validators=[MinValueValidator(1024), MaxValueValidator(65535)])
    wanted = models.BooleanField(default=True, help_text="Should be running.")
    restart_requested = models.BooleanField(default=False)
    status = models.CharField(max_length=12, choices=ServerStatus.choices, default=ServerStatus.STARTING)
    local_port = models.PositiveIntegerField(null=True, blank=True, help_text="The head's end of the SSH tunnel.")
    pid = models.PositiveIntegerField(null=True, blank=True)
    protocol = models.CharField(max_length=20, blank=True)
    free_memory = models.BigIntegerField(null=True, blank=True, help_text="Device 0's free bytes at start.")
    devices = models.JSONField(default=list, blank=True, help_text=(
        "The laptop's devices it serves, in order (-d): [\"Vulkan0\", \"CPU\"]; empty: the CPU alone."))
    awake = models.CharField(max_length=200, blank=True, help_text=(
        "Whether the laptop is kept awake while this server runs (systemd-inhibit, caffeinate), or why not."))
    restarts = models.PositiveIntegerField(default=0)
    failures = models.PositiveIntegerField(default=0, help_text="Failed starts in a row, for backoff.")
    last_death = models.TextField(blank=True)
    last_death_at = models.DateTimeField(null=True, blank=True)
    next_try_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["node", "port"], name="one_server_per_node_port")]

    def __str__(self) -> str:
        return f"rpc-server {self.node}:{self.port}"

    @property
    def direct(self) -> bool:
        return self.node.connection == Connection.DIRECT

    @property
    def endpoint(self) -> str | None:
        """Where the head's llama.cpp reaches this server."""
        if self.direct:
            return f"{self.node.host}:{self.port}"
        return f"127.0.0.1:{self.local_port}" if self.local_port else None


class MetricMinute(models.Model):
    """One minute of a laptop's samples, averaged: the long history (the last hour lives in Redis)."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="metric_minutes")
    minute = models.DateTimeField()
    samples = models.PositiveSmallIntegerField()
    cpu = models.FloatField()
    ram_used = models.BigIntegerField()
    ram_available = models.BigIntegerField()
    swap_used = models.BigIntegerField()
    rx = models.BigIntegerField(help_text="bytes/s received, averaged")
    tx = models.BigIntegerField(help_text="bytes/s sent, averaged")

    class Meta:
        ordering = ["minute"]
        constraints = [models.UniqueConstraint(fields=["node", "minute"], name="one_row_per_node_minute")]


class LinkCheck(models.Model):
    """Round trips and throughput between the head and a laptop, with what they mean."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="link_checks")
    report = models.JSONField()
    warnings = models.JSONField(default=list)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created"]


class LanScan(models.Model):
    """One search of an address range for laptops that came back at another address (nodes/laptops/refind.py)."""

    addresses = models.CharField(max_length=100, help_text="The range as the admin gave it: a CIDR or first-last.")
    public = models.BooleanField(default=False, help_text="The admin allowed addresses outside private ranges.")
    status = models.CharField(max_length=10, choices=ActionStatus.choices, default=ActionStatus.QUEUED)
    summary = models.TextField(blank=True)
    moved = models.JSONField(default=list, blank=True, help_text='[{"name": ..., "host": ..., "was": ...}]')
    error = models.TextField(blank=True)
    requested_by = models.ForeignKey("clusterpanel.User", null=True, blank=True, on_delete=models.SET_NULL)
    created = models.DateTimeField(auto_now_add=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"Scan of {self.addresses} ({self.status})"
