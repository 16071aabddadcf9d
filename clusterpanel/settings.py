"""Settings, all from the environment; defaults run on a laptop with nothing set."""

import ipaddress
from datetime import timedelta
from pathlib import Path

import dj_database_url
from channels_redis.core import RedisChannelLayer
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from clusterpanel.kit.env import env_bool, env_int, env_list, env_secret, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(env_str("DATA_DIR", str(BASE_DIR / "var"))).resolve()
RUN_DIR = DATA_DIR / "run"

SECRET_KEY = env_secret("SECRET_KEY", DATA_DIR / "secret_key")
# The key of the SSH keys and passwords stored encrypted (clusterpanel/kit/crypto.py), unless FERNET_KEY holds it.
# Keep it out of the data folder's backups, so one stolen backup is not database and key at once (README).
FERNET_KEY_FILE = Path(env_str("FERNET_KEY_FILE", str(DATA_DIR / "fernet.key"))).resolve()
DEBUG = env_bool("DEBUG", False)
# Laptop passwords and private keys stay off error pages even with DEBUG on (clusterpanel/web/reporting.py).
DEFAULT_EXCEPTION_REPORTER_FILTER = "clusterpanel.web.reporting.SecretsHiddenFilter"
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "channels",
    "csp",
    "ninja",  # its Swagger UI assets, served by the panel for /api/docs/
    "axes",
    "clusterpanel",
    "nodes",
    "models_app",
    "jobs",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "clusterpanel.web.staleforms.StaleFormMiddleware",  # inside messages: it leaves one on its redirect
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",  # last: turns a locked-out login into its page
]

ROOT_URLCONF = "clusterpanel.urls"
ASGI_APPLICATION = "clusterpanel.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.config(
        default=f"sqlite:///{DATA_DIR / 'clusterpanel.sqlite3'}", conn_max_age=60
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Web, workers and tests share one file: wait for the lock instead of failing.
    # WAL: readers never wait for a writer, and a commit is one append, not a journal and an fsync per table.
    DATABASES["default"]["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE",
                                       "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"}
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    # A file, not memory, so a test's web server and workers see the test database.
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / "test.sqlite3")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_USER_MODEL = "clusterpanel.User"
# The test suite's own (tests/services.py sets it for every process it starts): its named users are made a few
# hundred times, and each default hash costs over a second of CPU on a loaded 2-core machine. Never in a panel.
if env_bool("TESTS_HASH_PASSWORDS_FAST", False):
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "landing"  # lab admins to the dashboard, users to the chat
LOGOUT_REDIRECT_URL = "login"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
SESSION_COOKIE_HTTPONLY = True

# Login throttling (django-axes): after AXES_FAILURE_LIMIT wrong passwords for one user name from one address,
# that pair is refused for LOGIN_COOLOFF_MINUTES. The pair, not the address alone (a lab behind one NAT) nor
# the name alone (anyone could lock the admin out). Axes reads REMOTE_ADDR only: X-Forwarded-For is not
# trusted, so a client cannot make up a new address per guess (see README, "Behind a proxy").
# API tokens are not throttled: 256 random bits cannot be guessed (clusterpanel/accounts/models.py ApiToken).
AUTHENTICATION_BACKENDS = ["clusterpanel.accounts.auth.LoginThrottle", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LOGIN_COOLOFF_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_VERBOSE = False

# Content-Security-Policy (django-csp): the panel's own scripts, styles, images and sockets, nothing else; no
# inline script or style, so text that slips into a page as markup can neither run nor fetch. plotly.js
# (vendor/plotly-basic.min.js) adds two <style> elements, allowed by their hashes: an empty one it fills through the
# CSSOM (insertRule, which CSP does not govern), and MapLibre's fixed stylesheet. Any other <style> is refused;
# a plotly.js whose stylesheet changed shows as a violation in every browser test (tests/browser.py).
PLOTLY_STYLE_HASHES = ["'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU='",  # "" (empty)
                       "'sha256-ji27qzEtxXZW+7dun6UwjHXJ18e6WAin1VvNtkzIE/o='"]  # .maplibregl-map{…} (83 KB)
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF, *PLOTLY_STYLE_HASHES],
        "img-src": [SELF, "data:"],
        "connect-src": [SELF],  # same-origin ws: and wss: too (CSP level 3)
        "font-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(DATA_DIR / "static")))
STATICFILES_DIRS = [BASE_DIR / "static"]
# Collected under names that carry a hash of their content (plan.3f2a9c1b7e4d.js), which WhiteNoise serves
# as immutable for ten years; a changed file gets a new name. Unhashed names keep WhiteNoise's 60 s.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "clusterpanel.web.staticfiles.HashedStaticStorage"},
}
MEDIA_ROOT = DATA_DIR / "media"


def _own_redis_url() -> str:
    """The panel's own Redis: the URL `runpanel` wrote, else its usual port."""
    written = RUN_DIR / "redis.url"
    if written.exists():
        return written.read_text().strip()
    return f"redis://127.0.0.1:{env_int('REDIS_PORT', 6390)}/0"


REDIS_URL = env_str("REDIS_URL") or _own_redis_url()

# channels_redis waits for a message with a BZPOPMIN of `brpop_timeout` (5 s), and redis-py's asyncio
# connections give up on any read after socket_timeout (also 5 s by default): left as they come, every page,
# socket and request that waited on a quiet group died with a TimeoutError. A read must outlast the wait. A Redis
# that really went away still shows at once (the connection closes), or after REDIS_READ_TIMEOUT_S when it just
# stops answering. Tests make both short (clusterpanel/kit/channel_layer.py), so their soaks outlast them in seconds.
CHANNEL_WAIT_S = env_int("CHANNEL_WAIT_S", RedisChannelLayer.brpop_timeout)
if CHANNEL_WAIT_S < 1:
    raise SystemExit("CHANNEL_WAIT_S must be at least 1 (seconds).")
REDIS_READ_TIMEOUT_S = env_int("REDIS_READ_TIMEOUT_S", 15)
if REDIS_READ_TIMEOUT_S <= CHANNEL_WAIT_S:
    raise SystemExit(f"REDIS_READ_TIMEOUT_S must be more than CHANNEL_WAIT_S ({CHANNEL_WAIT_S} s: channels_redis "
                     "waits that long for a message).")
# How long a request or stream waiting for a job's events keeps trying to reach a Redis that went away before it
# answers 503 (jobs/queue/listen.py); meanwhile it also watches the job's row, which outlives Redis.
REDIS_OUTAGE_S = env_int("REDIS_OUTAGE_S", 60)
# How often a streamed answer that waits (behind other jobs, or for its model) says so in an SSE comment, until
# its first token (jobs/api/openai_views.py): well under the 60 s read timeouts of clients and proxies.
STREAM_KEEPALIVE_S = env_int("STREAM_KEEPALIVE_S", 10)
if STREAM_KEEPALIVE_S < 1:
    raise SystemExit("STREAM_KEEPALIVE_S must be at least 1 (seconds).")
# daphne pings each WebSocket this often and closes one whose browser has not answered within the timeout
# (clusterpanel/web/webserver.py); tests make them short to soak an idle page past them.
WEBSOCKET_PING_S = env_int("WEBSOCKET_PING_S", 20)
WEBSOCKET_PING_TIMEOUT_S = env_int("WEBSOCKET_PING_TIMEOUT_S", 30)
if not 1 <= WEBSOCKET_PING_S <= WEBSOCKET_PING_TIMEOUT_S:
    raise SystemExit("WEBSOCKET_PING_S must be at least 1 and at most WEBSOCKET_PING_TIMEOUT_S (seconds).")
# How many people get their own series in /metrics' per-person token counters; the rest share "(others)".
METRICS_TOP_USERS = env_int("METRICS_TOP_USERS", 10)
if METRICS_TOP_USERS < 0:
    raise SystemExit("METRICS_TOP_USERS must be 0 or more.")
# Who may scrape /metrics without a token: addresses or networks (e.g. "10.0.0.5,192.168.1.0/24").
METRICS_ALLOWED = env_list("METRICS_ALLOWED", [])
for _allowed in METRICS_ALLOWED:
    try:
        ipaddress.ip_network(_allowed, strict=False)
    except ValueError:
        raise ImproperlyConfigured(f"METRICS_ALLOWED: {_allowed!r} is not an address or a network "
                                   "(e.g. 10.0.0.5 or 192.168.1.0/24).") from None
# channels_redis' pooled connections are not retried: after a Redis restart each one still in the pool failed its
# next command ("Connection closed by server"), so handshakes answered 500 for seconds after Redis was back. One
# retry on a new connection costs nothing while Redis is up and fails as fast while it is down.
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "clusterpanel.kit.channel_layer.ChannelLayer",
        "CONFIG": {"wait_s": CHANNEL_WAIT_S, "hosts": [{"address": REDIS_URL, "socket_timeout": REDIS_READ_TIMEOUT_S,
                              "socket_connect_timeout": 5, "socket_keepalive": True,
                              "retry": AsyncRetry(NoBackoff(), 1, supported_errors=(RedisConnectionError,))}]},
    }
}

CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = REDIS_URL
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# Task modules besides each app's tasks.py: the LAN scan (nodes/laptops/refind.py) queues probes through
# nodes/tasks.py, which cannot import it back.
CELERY_IMPORTS = ["nodes.laptops.refind"]
# Redis hands an unacknowledged task to another worker after this long. It must outlast the longest task
# (a deployment's prepare: runtime, caches and a verification load of up to 30 min): a task redelivered while it
# still runs would run twice. Tasks of a worker that dies are settled when a worker starts (nodes/tasks.py).
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env_int("TASK_VISIBILITY_TIMEOUT_S", 6 * 3600)}
CELERY_WORKER_PROC_ALIVE_TIMEOUT = 120  # an engine child settles interrupted jobs over SSH before it starts
# Periodic work, sent by `celery beat` (one process: runpanel's beat, compose's beat service).
CACHE_CLEAN_EVERY_S = env_int("CACHE_CLEAN_EVERY_S", 3600)
# On-call models (models_app/oncall/service.py): how often idle ones are unloaded and waiting ones placed, and the
# seconds in one of an admin's "idle minutes" (tests make it short).
ONCALL_CHECK_EVERY_S = env_int("ONCALL_CHECK_EVERY_S", 30)
ONCALL_IDLE_MINUTE_S = env_int("ONCALL_IDLE_MINUTE_S", 60)
# Jobs that wait this long with nothing running and no message in their engine's queue (lost with a Redis
# restart) get one from the supervisor (jobs/engine/workers.py); tests make it short.
ENGINE_STALLED_S = env_int("ENGINE_STALLED_S", 30)
if ENGINE_STALLED_S < 1:
    raise SystemExit("ENGINE_STALLED_S must be at least 1 (seconds).")
# Head memory each engine keeps prompts in after their sequence went to another job (jobs/engine/promptstore.py),
# as llama-server's --cache-ram; 0 keeps none.
ENGINE_PROMPT_CACHE_MIB = env_int("ENGINE_PROMPT_CACHE_MIB", 256)
if ENGINE_PROMPT_CACHE_MIB < 0:
    raise SystemExit("ENGINE_PROMPT_CACHE_MIB must be 0 or more (MiB).")
# How long a quick command on a laptop (an rpc-server's start, stop or state) may take before the laptop counts
# as hanging (nodes/servers/rpcserver.py); a laptop found at a new address is recovered after this long, once the
# supervisor's round at its old address has given up (jobs/engine/moves.py). Tests make it short. A start gives
# systemd-inhibit 5 s and the new server's pid 1 s more.
LAPTOP_QUICK_COMMAND_S = env_int("LAPTOP_QUICK_COMMAND_S", 15)
if LAPTOP_QUICK_COMMAND_S < 7:
    raise SystemExit("LAPTOP_QUICK_COMMAND_S must be at least 7 (seconds): starting an rpc-server on a laptop "
                     "may take 6 s.")
CELERY_BEAT_SCHEDULE = {
    "clean-laptop-caches": {"task": "nodes.tasks.clean_caches", "schedule": float(CACHE_CLEAN_EVERY_S)},
    "look-after-on-call-models": {"task": "jobs.tasks.look_after_on_call", "schedule": float(ONCALL_CHECK_EVERY_S)},
}

# A laptop's rpc cache and downloads may take this share of the room they could have (what they hold plus the
# free disk) unless its page sets a cap by hand (nodes/servers/cachecap.py says why half).
CACHE_CAP_PERCENT = env_int("CACHE_CAP_PERCENT", 50)

# How long an rpc-server's OpenMP threads spin for work before they sleep (libgomp's GOMP_SPINCOUNT, in
# rounds of a pause instruction). libgomp's own 300 000 keep a laptop's cores busy for milliseconds after
# each of its computations, most of the time it waits for the other laptops: laptops sharing cores (the
# simulated LAN, two deployments on one laptop) run at little more than half the speed. 100 000 costs a
# laptop computing alone nothing measurable (bench/omp_spin.py). 0: libgomp's default.
RPC_SPIN_COUNT = env_int("RPC_SPIN_COUNT", 100_000)

# How many times a job interrupted by a laptop's death is retried after the re-plan.
JOB_RETRIES = env_int("JOB_RETRIES", 1)

# Tokens made within this many ms of the last send travel to listeners together (still one event each): fewer
# wake-ups per token for a fast model on a very small head. 0 (the default) sends each token as it is made, once
# per decode step, as llama-server does: held, a person saw tokens arrive in clumps (jobs/queue/stream.py).
STREAM_HOLD_MS = env_int("STREAM_HOLD_MS", 0)

# Batch files (docs/batch.md): the largest file and the most requests one batch may hold.
BATCH_MAX_BYTES = env_int("BATCH_MAX_BYTES", 20 << 20)
BATCH_MAX_LINES = env_int("BATCH_MAX_LINES", 10_000)

# Models uploaded from browsers end as MODELS_DIR/<name>.gguf. Their chunks gather in MODELS_DIR/.uploads
# under server-chosen names: on the same filesystem (even when MODELS_DIR is its own volume, as in
# docker-compose.yml), so a finished file is hard-linked into place, never copied. Unfinished ones go after a day.
MODELS_DIR = Path(env_str("MODELS_DIR", str(DATA_DIR / "models"))).resolve()
UPLOAD_DIR = MODELS_DIR / ".uploads"
UPLOAD_CHUNK_BYTES = env_int("UPLOAD_CHUNK_BYTES", 8 << 20)
UPLOAD_MAX_BYTES = env_int("UPLOAD_MAX_BYTES", 256 << 30)
UPLOAD_MAX_AGE_HOURS = env_int("UPLOAD_MAX_AGE_HOURS", 24)

# Request bodies: the web server refuses larger ones before reading them (clusterpanel/web/webserver.py,
# bodylimits.py). Without a session cookie or an API token, enough to log in; with one, a JSON body or a form
# (Django applies the same limit), and on their own routes a model upload's chunk and a batch file.
BODY_MAX_ANONYMOUS_BYTES = env_int("BODY_MAX_ANONYMOUS_BYTES", 64 << 10)
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("BODY_MAX_BYTES", 4 << 20)
# Behind a proxy that terminates TLS (docs/proxy.md): only where the proxy alone reaches the panel's port and
# sets X-Forwarded-Proto and X-Forwarded-For itself, or any client could pass for https or for another address
# (`make run` then has daphne take them). The proxy redirects http to https (a redirect here would also send
# the healthcheck on 127.0.0.1 there).
BEHIND_TLS_PROXY = env_bool("BEHIND_TLS_PROXY", False)
if BEHIND_TLS_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env_int("HSTS_SECONDS", 365 * 24 * 3600)

# The demo's simulated laptops (`make run` as root): their LAN's name (the laptops are <name>-1, -2, -3) and
# subnet, for a machine whose own networks use 10.230.0.0/24, or two panels side by side.
DEMO_LAN_NAME = env_str("DEMO_LAN_NAME", "demo")
DEMO_LAN_SUBNET = env_str("DEMO_LAN_SUBNET", "10.230.0.0/24")

# Where the llama.cpp builds are cached (see scripts/build_llama.py).
BUILD_CACHE_DIR = Path(
    env_str("CLUSTERPANEL_CACHE", str(Path.home() / ".cache" / "clusterpanel"))
)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "filters": {"refusals_in_one_line": {"()": "clusterpanel.web.reporting.RefusalsInOneLine"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    # paramiko logs each failed connection as an ERROR traceback, line by line; the panel says it in one line.
    "loggers": {"paramiko": {"level": "CRITICAL"},
                "django.request": {"filters": ["refusals_in_one_line"]}},
}
