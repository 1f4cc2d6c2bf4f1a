"""Settings of the GPU portal, read from the environment.

Every setting has a safe production default: DEBUG is off, cookies are HttpOnly, and when
PORTAL_TLS is on (the default outside the demo) cookies are Secure and HSTS is sent. The demo
(`make demo`) and the test suite set the variables they need; docs/settings.md lists them all.
"""

from pathlib import Path

import environ
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from portal.database import for_concurrent_writers

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()

DEBUG = env.bool("PORTAL_DEBUG", default=False)

SECRET_KEY = env.str("PORTAL_SECRET_KEY", default="")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("PORTAL_SECRET_KEY must be set (50+ random characters).")
    SECRET_KEY = "insecure-debug-only-key-" + "x" * 40

ALLOWED_HOSTS = env.list("PORTAL_ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env.list("PORTAL_CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "csp",
    "axes",
    "oauth2_provider",
    "identity",
    "audit",
    "clusters",
    "catalogue",
    "workloads",
    "credentials",
    "usage",
    "tenants",
    "storage",
    "access",
    "notifications",
    "budgets",
    "calendars",
    "files",
    "allocations",
    "billing",
    "api",
    "portal",
]

MIDDLEWARE = [
    # first: request counts and latencies for /metrics include the whole stack
    "portal.metrics.PrometheusMiddleware",
    # a request that lock contention ended before it wrote anything runs again
    "core.contention.ContentionRetryMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # below WhiteNoise: static files keep their own headers (long-lived, hashed names)
    "portal.headers.NoStoreMiddleware",
    "csp.middleware.CSPMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "identity.middleware.KeystoneSessionMiddleware",
    # request.tenant: the current project's tenant, once per request
    "tenants.middleware.CurrentTenantMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "axes.middleware.AxesMiddleware",
]

# Content-Security-Policy (django-csp) on every page: scripts, styles, images, fonts and
# fetches from the portal's own origin only, nothing inline (no 'unsafe-inline', no eval), no
# plugins, no <base>, and no page of the portal inside another site's frame. Images may also be
# data: URIs (Swagger UI's icons). docs/settings.md says how a site adds to it.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [NONE],
        "frame-ancestors": [NONE],
    },
}

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"

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
                "identity.context_processors.identity",
                "usage.context_processors.gpu_alerts",
                "kube.context_processors.cluster_status",
                "notifications.context_processors.notifications_bell",
            ],
        },
    },
]

# --- database: SQLite for the demo, PostgreSQL everywhere else -----------------------------
DATABASES = {
    "default": env.db_url(
        "DATABASE_URL", default=f"sqlite:///{BASE_DIR / '.demo' / 'portal.sqlite3'}"
    )
}
# SQLite: WAL, immediate transactions and a busy timeout, so that concurrent writers wait for
# one another instead of failing with "database is locked" (portal/database.py says why)
DATABASES["default"] = for_concurrent_writers(
    DATABASES["default"], lock_timeout=env.float("PORTAL_DB_LOCK_TIMEOUT", default=20.0))
DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("PORTAL_DB_CONN_MAX_AGE", default=60))
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_USER_MODEL = "keystone.User"
AUTHENTICATION_BACKENDS = [
    # axes first: it refuses a locked-out user before Keystone is asked
    "axes.backends.AxesStandaloneBackend",
    "identity.backend.KeystoneBackend",
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"

# --- Redis: Celery broker, cache, token-validation cache ----------------------------------
REDIS_URL = env.str("REDIS_URL", default="redis://127.0.0.1:6379/0")
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "gpu-portal",
        "TIMEOUT": 300,
        # a Redis outage must not turn every page into a 500: the cache is an optimisation
        "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
    }
}

# Sessions live on the server (database, fronted by the cache); the browser only holds the id.
SESSION_ENGINE = "django.contrib.sessions.backends.db"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_AGE = env.int("PORTAL_SESSION_AGE", default=12 * 3600)
SESSION_COOKIE_NAME = "gpuportal_sessionid"
CSRF_COOKIE_HTTPONLY = True

# --- TLS: on by default; the demo (plain HTTP on loopback) turns it off --------------------
PORTAL_TLS = env.bool("PORTAL_TLS", default=not DEBUG)
if PORTAL_TLS:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = env.bool("PORTAL_SSL_REDIRECT", default=True)
    SECURE_HSTS_SECONDS = env.int("PORTAL_HSTS_SECONDS", default=31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("PORTAL_HSTS_INCLUDE_SUBDOMAINS", default=True)
    SECURE_HSTS_PRELOAD = env.bool("PORTAL_HSTS_PRELOAD", default=True)
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
if env.bool("PORTAL_BEHIND_TLS_PROXY", default=False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

# --- OpenStack Keystone -------------------------------------------------------------------
KEYSTONE_URL = env.str("KEYSTONE_URL", default="http://127.0.0.1:5000/v3").rstrip("/")
KEYSTONE_DEFAULT_DOMAIN = env.str("KEYSTONE_DEFAULT_DOMAIN", default="Default")
KEYSTONE_TIMEOUT = env.float("KEYSTONE_TIMEOUT", default=5.0)
# The portal's own service identity: validates X-Auth-Token headers of API callers.
KEYSTONE_SERVICE_USER = env.str("KEYSTONE_SERVICE_USER", default="gpu-portal")
KEYSTONE_SERVICE_PASSWORD = env.str("KEYSTONE_SERVICE_PASSWORD", default="")
KEYSTONE_SERVICE_PROJECT = env.str("KEYSTONE_SERVICE_PROJECT", default="service")
KEYSTONE_SERVICE_DOMAIN = env.str("KEYSTONE_SERVICE_DOMAIN", default="Default")
# Holding this role on this project makes a user a portal admin (as does a system-scoped admin).
KEYSTONE_ADMIN_PROJECT = env.str("KEYSTONE_ADMIN_PROJECT", default="admin")
KEYSTONE_ADMIN_ROLE = env.str("KEYSTONE_ADMIN_ROLE", default="admin")
# How long a validated token is trusted before Keystone is asked again (revocation delay).
KEYSTONE_TOKEN_CACHE_TTL = env.int("KEYSTONE_TOKEN_CACHE_TTL", default=60)
# How long a token Keystone refused is answered 401 without asking Keystone again.
KEYSTONE_TOKEN_REFUSED_TTL = env.int("KEYSTONE_TOKEN_REFUSED_TTL", default=5)

# --- the cluster ---------------------------------------------------------------------------
# a kubeconfig file; empty = the in-cluster service account
KUBECONFIG = env.str("KUBECONFIG", default="")
# the name of the cluster the portal runs beside (the one KUBECONFIG, or the pod's service
# account, reaches): the first of the clusters, made from these settings by a migration
PORTAL_CLUSTER_NAME = env.str("PORTAL_CLUSTER_NAME", default="main")
# the cluster read model (cluster): how long a read waits for its first list, and how
# long a synced copy is still served while its watches fail
PORTAL_CLUSTER_CACHE_SYNC_SECONDS = env.float("PORTAL_CLUSTER_CACHE_SYNC_SECONDS", default=2.0)
PORTAL_CLUSTER_CACHE_STALE_SECONDS = env.float("PORTAL_CLUSTER_CACHE_STALE_SECONDS", default=30.0)

# --- workloads ----------------------------------------------------------------------------
# MetalLB address pool for workload services (empty: MetalLB's default)
PORTAL_LB_ADDRESS_POOL = env.str("PORTAL_LB_ADDRESS_POOL", default="")
# how service workloads are reached (docs/settings.md, docs/operator-guide.md): "loadbalancer",
# an address of the pool each; "shared", one gateway's address for all, a host name each
# (w-<id>.PORTAL_SERVICE_DOMAIN, routed by an Ingress of class PORTAL_INGRESS_CLASS)
PORTAL_SERVICE_EXPOSURE = env.str("PORTAL_SERVICE_EXPOSURE", default="loadbalancer")
PORTAL_SERVICE_DOMAIN = env.str("PORTAL_SERVICE_DOMAIN", default="")
PORTAL_SERVICE_SCHEME = env.str("PORTAL_SERVICE_SCHEME", default="https")
PORTAL_SERVICE_PORT = env.int("PORTAL_SERVICE_PORT", default=0)  # 0: the scheme's own
PORTAL_INGRESS_CLASS = env.str("PORTAL_INGRESS_CLASS", default="")
# the tenant's persistent home volume, mounted at /home/portal by workloads that ask for it
PORTAL_HOME_VOLUME_SIZE = env.str("PORTAL_HOME_VOLUME_SIZE", default="100Gi")
PORTAL_HOME_STORAGE_CLASS = env.str("PORTAL_HOME_STORAGE_CLASS", default="")
PORTAL_HOME_ACCESS_MODE = env.str("PORTAL_HOME_ACCESS_MODE", default="ReadWriteMany")
# every volume's claim (storage/), the home volume's included
PORTAL_VOLUME_ACCESS_MODE = env.str("PORTAL_VOLUME_ACCESS_MODE", default=PORTAL_HOME_ACCESS_MODE)
# the CSI driver that mounts an S3 dataset's bucket (mountpoint-s3's name; its credentials are
# the driver's own, set where it is installed); empty: no S3 dataset can be published
PORTAL_S3_CSI_DRIVER = env.str("PORTAL_S3_CSI_DRIVER", default="s3.csi.aws.com")
# how long publishing an S3 dataset waits for its endpoint to say whether the bucket is there
PORTAL_S3_PROBE_SECONDS = env.float("PORTAL_S3_PROBE_SECONDS", default=5.0)
# the registries/repository prefixes every image a workload runs must come from, site-wide
# (comma-separated, e.g. nvcr.io/nvidia,quay.io/jupyter,registry.example.org); empty: any. A
# tenant's own prefixes (admin page) narrow it further: an image must be inside both
PORTAL_IMAGE_REGISTRIES = env.list("PORTAL_IMAGE_REGISTRIES", default=[])
# a launch whose registry secret logs in to its image's registry: the image's manifest resolved
# with that login first (credentials/pulls.py), within this many seconds; a registry that does
# not answer in time is a warning, never a refusal. 0: no such check
PORTAL_REGISTRY_CHECK_SECONDS = env.float("PORTAL_REGISTRY_CHECK_SECONDS", default=5.0)
# a launch not yet in the cluster after this long is handed to a worker again
PORTAL_LAUNCH_REQUEUE_SECONDS = env.int("PORTAL_LAUNCH_REQUEUE_SECONDS", default=60)
# a launch that still waits in the queue this long after its objects were made: its owner is
# told so (one admitted before hears only "started")
PORTAL_QUEUED_NOTICE_SECONDS = env.int("PORTAL_QUEUED_NOTICE_SECONDS", default=10)

# --- GPU usage (usage/scrape.py documents the discovery order) ----------------------
# a Prometheus that scrapes the GPU exporters: when set, it is asked instead of the exporters
PORTAL_PROMETHEUS_URL = env.str("PORTAL_PROMETHEUS_URL", default="")
# exporters at fixed addresses (comma-separated /metrics URLs): when set, scraped instead of
# the exporter Service's endpoints (agents on loopback, which Endpoints cannot hold)
PORTAL_GPU_EXPORTER_URLS = env.list("PORTAL_GPU_EXPORTER_URLS", default=[])
# the Service (namespace/name) of the NVML agent or dcgm-exporter; empty: do not look for it
PORTAL_GPU_EXPORTER_SERVICE = env.str("PORTAL_GPU_EXPORTER_SERVICE", default="gpu-portal/gpuagent")
PORTAL_GPU_EXPORTER_PORT = env.int("PORTAL_GPU_EXPORTER_PORT", default=9400)
PORTAL_USAGE_SCRAPE_INTERVAL = env.float("PORTAL_USAGE_SCRAPE_INTERVAL", default=15.0)
PORTAL_USAGE_SCRAPE_TIMEOUT = env.float("PORTAL_USAGE_SCRAPE_TIMEOUT", default=5.0)
PORTAL_USAGE_RAW_RETENTION_HOURS = env.int("PORTAL_USAGE_RAW_RETENTION_HOURS", default=48)
PORTAL_USAGE_MINUTE_RETENTION_DAYS = env.int("PORTAL_USAGE_MINUTE_RETENTION_DAYS", default=35)
PORTAL_USAGE_ROLLUP_LOOKBACK_MINUTES = env.int("PORTAL_USAGE_ROLLUP_LOOKBACK_MINUTES", default=15)
# idle culling (usage/culling.py): how often the check runs; the thresholds are per tenant
PORTAL_IDLE_CHECK_SECONDS = env.float("PORTAL_IDLE_CHECK_SECONDS", default=60.0)
# GPU health (usage/health.py): a GPU not reported for this many scrape intervals is
# lost; with CORDON on, a node with an unhealthy GPU is cordoned (and uncordoned on recovery)
PORTAL_GPU_HEALTH_LOST_SCRAPES = env.int("PORTAL_GPU_HEALTH_LOST_SCRAPES", default=4)
PORTAL_GPU_HEALTH_CORDON = env.bool("PORTAL_GPU_HEALTH_CORDON", default=False)
# XIDs that mark a GPU degraded (comma-separated); empty: health.CRITICAL_XIDS
PORTAL_GPU_HEALTH_CRITICAL_XIDS = env.list("PORTAL_GPU_HEALTH_CRITICAL_XIDS", cast=int, default=[])

# --- e-mail (idle warnings); no PORTAL_EMAIL_HOST: no e-mail is sent --------------------------
EMAIL_HOST = env.str("PORTAL_EMAIL_HOST", default=env.str("EMAIL_HOST", default=""))
EMAIL_PORT = env.int("PORTAL_EMAIL_PORT", default=587)
EMAIL_HOST_USER = env.str("PORTAL_EMAIL_USER", default="")
EMAIL_HOST_PASSWORD = env.str("PORTAL_EMAIL_PASSWORD", default="")
EMAIL_USE_TLS = env.bool("PORTAL_EMAIL_USE_TLS", default=True)
DEFAULT_FROM_EMAIL = env.str("PORTAL_EMAIL_FROM", default="gpu-portal@localhost")

# --- tenants ------------------------------------------------------------------------------
PORTAL_NAMESPACE_PREFIX = env.str("PORTAL_NAMESPACE_PREFIX", default="gpu-")
# Pod Security admission levels of tenant namespaces. A tenant an admin lets run templates that
# may run as root enforces "baseline" where this says "restricted" (tenants.selectors)
PORTAL_POD_SECURITY_ENFORCE = env.str("PORTAL_POD_SECURITY_ENFORCE", default="restricted")
PORTAL_POD_SECURITY_WARN = env.str("PORTAL_POD_SECURITY_WARN", default="restricted")
PORTAL_POD_SECURITY_AUDIT = env.str("PORTAL_POD_SECURITY_AUDIT", default="restricted")
# Egress of tenant pods (tenants/manifests.py make_egress_rules; docs/operator-guide.md, "What
# workloads may run and reach"): cluster DNS, their own namespace, the portal's web pods, the
# operator's destinations and, if allowed, the internet. Never the API server or the kubelets.
PORTAL_WORKLOAD_EGRESS_DNS_NAMESPACE = env.str("PORTAL_WORKLOAD_EGRESS_DNS_NAMESPACE",
                                               default="kube-system")
PORTAL_WORKLOAD_EGRESS_DNS_POD_LABELS = env.dict("PORTAL_WORKLOAD_EGRESS_DNS_POD_LABELS",
                                                 default={"k8s-app": "kube-dns"})
# the portal's web pods, which the proxies ask for tokens and keys (PORTAL_OIDC_BACKEND_URL);
# an empty namespace: no such rule
PORTAL_WORKLOAD_EGRESS_PORTAL_NAMESPACE = env.str("PORTAL_WORKLOAD_EGRESS_PORTAL_NAMESPACE",
                                                  default="gpu-portal")
PORTAL_WORKLOAD_EGRESS_PORTAL_POD_LABELS = env.dict(
    "PORTAL_WORKLOAD_EGRESS_PORTAL_POD_LABELS",
    default={"app.kubernetes.io/name": "gpu-portal", "app.kubernetes.io/component": "web"})
PORTAL_WORKLOAD_EGRESS_PORTAL_PORT = env.str("PORTAL_WORKLOAD_EGRESS_PORTAL_PORT", default="8000")
# registry mirrors, package proxies, storage: CIDR (every port) or CIDR:PORT, comma-separated
PORTAL_WORKLOAD_EGRESS_CIDRS = env.list("PORTAL_WORKLOAD_EGRESS_CIDRS", default=[])
# the internet: every address but the cluster's own ranges (INTERNET_EXCEPT; empty: the private,
# shared, link-local and loopback ranges) and the metadata address
PORTAL_WORKLOAD_EGRESS_INTERNET = env.bool("PORTAL_WORKLOAD_EGRESS_INTERNET", default=True)
PORTAL_WORKLOAD_EGRESS_INTERNET_EXCEPT = env.list("PORTAL_WORKLOAD_EGRESS_INTERNET_EXCEPT",
                                                  default=[])
# group names k8s-keystone-auth gives a user: the project id, plus the role groups its role
# mapping adds (deploy/keystone-auth/sync-config.yaml), named by this format ({role}; also
# {project_id}, {project_name} where a site keeps per-project Keystone groups); docs/rbac.md
PORTAL_RBAC_PROJECT_GROUP_FORMAT = env.str("PORTAL_RBAC_PROJECT_GROUP_FORMAT", default="{project_id}")
PORTAL_RBAC_ROLE_GROUP_FORMAT = env.str("PORTAL_RBAC_ROLE_GROUP_FORMAT",
                                        default="gpu-portal:{role}")
# LimitRange defaults for containers that declare no requests/limits
PORTAL_DEFAULT_CONTAINER_CPU = env.str("PORTAL_DEFAULT_CONTAINER_CPU", default="1")
PORTAL_DEFAULT_CONTAINER_MEMORY = env.str("PORTAL_DEFAULT_CONTAINER_MEMORY", default="4Gi")
PORTAL_DEFAULT_CONTAINER_CPU_REQUEST = env.str("PORTAL_DEFAULT_CONTAINER_CPU_REQUEST", default="500m")
PORTAL_DEFAULT_CONTAINER_MEMORY_REQUEST = env.str("PORTAL_DEFAULT_CONTAINER_MEMORY_REQUEST",
                                                  default="2Gi")
# quota of a tenant seen for the first time
PORTAL_DEFAULT_QUOTA_GPUS_TOTAL = env.int("PORTAL_DEFAULT_QUOTA_GPUS_TOTAL", default=2)
PORTAL_DEFAULT_QUOTA_GPUS_PER_TYPE = env.int("PORTAL_DEFAULT_QUOTA_GPUS_PER_TYPE", default=1)
PORTAL_DEFAULT_QUOTA_CPU = env.int("PORTAL_DEFAULT_QUOTA_CPU", default=32)
PORTAL_DEFAULT_QUOTA_MEMORY_GB = env.int("PORTAL_DEFAULT_QUOTA_MEMORY_GB", default=256)
PORTAL_DEFAULT_QUOTA_WORKLOADS = env.int("PORTAL_DEFAULT_QUOTA_WORKLOADS", default=10)
PORTAL_DEFAULT_QUOTA_STORAGE_GIB = env.int("PORTAL_DEFAULT_QUOTA_STORAGE_GIB", default=500)
PORTAL_DEFAULT_QUOTA_VOLUMES = env.int("PORTAL_DEFAULT_QUOTA_VOLUMES", default=10)
PORTAL_DEFAULT_MAX_RUNTIME_MINUTES = env.int("PORTAL_DEFAULT_MAX_RUNTIME_MINUTES", default=0)
# a tenant whose Keystone project is gone (or that an admin deletes) keeps its namespace this long
PORTAL_TENANT_DELETE_GRACE_MINUTES = env.int("PORTAL_TENANT_DELETE_GRACE_MINUTES", default=60)

# --- login throttling (django-axes): per user name and client address ---------------------
AXES_FAILURE_LIMIT = env.int("PORTAL_LOGIN_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = env.float("PORTAL_LOGIN_COOLOFF_HOURS", default=0.25)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
# the user name case-folded: `Student` shares the lock of `student`
AXES_USERNAME_CALLABLE = "identity.views.login_throttle_username"
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "identity.views.login_locked_out"
AXES_IPWARE_META_PRECEDENCE_ORDER = ["REMOTE_ADDR"]
AXES_VERBOSE = False

# --- workload access: the authenticating proxy in front of every service (access) ---
# The portal is the OpenID Connect provider of each service workload's oauth2-proxy sidecar.
# Its signing key (RSA, PEM): PORTAL_OIDC_PRIVATE_KEY, or a file named by
# PORTAL_OIDC_PRIVATE_KEY_FILE (a mounted Secret). Without one, service workloads cannot be
# protected and `manage.py check --deploy` says so (access/checks.py).
PORTAL_OIDC_PRIVATE_KEY = env.str("PORTAL_OIDC_PRIVATE_KEY", default="", multiline=True)
if not PORTAL_OIDC_PRIVATE_KEY and env.str("PORTAL_OIDC_PRIVATE_KEY_FILE", default=""):
    PORTAL_OIDC_PRIVATE_KEY = Path(env.str("PORTAL_OIDC_PRIVATE_KEY_FILE")).read_text()
# The issuer, as browsers reach the portal (…/o): the proxies send users there to log in.
PORTAL_OIDC_ISSUER = env.str("PORTAL_OIDC_ISSUER", default="http://127.0.0.1:8000/o").rstrip("/")
# The portal as the proxies reach it from inside the cluster (token and key endpoints);
# empty: the issuer.
PORTAL_OIDC_BACKEND_URL = env.str("PORTAL_OIDC_BACKEND_URL", default="").rstrip("/")
PORTAL_AUTH_PROXY_IMAGE = env.str("PORTAL_AUTH_PROXY_IMAGE",
                                  default="quay.io/oauth2-proxy/oauth2-proxy:v7.15.4")
# a kubernetes.io/tls Secret of this name in each tenant namespace (the operator's, or
# cert-manager's): the proxies serve HTTPS with it. Empty: plain HTTP (the demo).
PORTAL_AUTH_PROXY_TLS_SECRET = env.str("PORTAL_AUTH_PROXY_TLS_SECRET", default="")
# the workloads' addresses are HTTPS: the proxies' own certificate, or the shared gateway's
_WORKLOADS_HTTPS = bool(PORTAL_AUTH_PROXY_TLS_SECRET) or (
    PORTAL_SERVICE_EXPOSURE == "shared" and PORTAL_SERVICE_SCHEME == "https")
# how often a proxy asks the portal again whether a signed-in user may still get through:
# a user removed from the project, or whose portal session ended, is out within this
PORTAL_AUTH_PROXY_RECHECK_SECONDS = env.int("PORTAL_AUTH_PROXY_RECHECK_SECONDS", default=45)
# how long a proxy session lives; while the portal is down, admitted sessions keep working
# for at most PORTAL_AUTH_PROXY_OFFLINE_SECONDS (the ID token's lifetime)
PORTAL_AUTH_PROXY_SESSION_SECONDS = env.int("PORTAL_AUTH_PROXY_SESSION_SECONDS",
                                            default=8 * 3600)
PORTAL_AUTH_PROXY_OFFLINE_SECONDS = env.int("PORTAL_AUTH_PROXY_OFFLINE_SECONDS", default=900)
# a script's bearer token for one workload lives this long (it asks for another)
PORTAL_WORKLOAD_TOKEN_SECONDS = env.int("PORTAL_WORKLOAD_TOKEN_SECONDS", default=60)
# SSH into workloads (access/ssh.py): the CA that signs users' certificates (an
# ed25519 private key, or a file holding one; default: derived from SECRET_KEY), how long a
# certificate lives, whether a new tenant allows SSH, and where a workload's SSH server reports
# its sessions (default: the OIDC backend address without /o)
PORTAL_SSH_CA_KEY = env.str("PORTAL_SSH_CA_KEY", default="", multiline=True)
PORTAL_SSH_CA_KEY_FILE = env.str("PORTAL_SSH_CA_KEY_FILE", default="")
PORTAL_SSH_CERTIFICATE_SECONDS = env.int("PORTAL_SSH_CERTIFICATE_SECONDS", default=900)
PORTAL_SSH_ENABLED_DEFAULT = env.bool("PORTAL_SSH_ENABLED_DEFAULT", default=True)
PORTAL_SSH_REPORT_URL = env.str("PORTAL_SSH_REPORT_URL", default="")

# --- notifications ------------------------------------------------------------------
# the portal's address as its users' browsers know it: the links in e-mails and webhook posts
PORTAL_PUBLIC_URL = env.str("PORTAL_PUBLIC_URL",
                            default=PORTAL_OIDC_ISSUER.removesuffix("/o")).rstrip("/")
# a webhook receiver that is down or answers 5xx/429 is tried again with exponential back-off
# (up to 30 s, 60 s, 120 s, 240 s: each wait drawn between 0 and that, at most 10 min) this many
# times, then the delivery fails: about as long a spell as 8 tries from 1 s gave, in half the
# POSTs (a dead receiver costs the webhook workers 5 POSTs a notification, not 9)
PORTAL_WEBHOOK_RETRIES = env.int("PORTAL_WEBHOOK_RETRIES", default=4)
PORTAL_WEBHOOK_RETRY_BACKOFF_SECONDS = env.int("PORTAL_WEBHOOK_RETRY_BACKOFF_SECONDS", default=30)
PORTAL_WEBHOOK_TIMEOUT_SECONDS = env.float("PORTAL_WEBHOOK_TIMEOUT_SECONDS", default=5.0)
# a webhook whose deliveries failed this many times in a row (each after its retries) is
# disabled and its owner told; re-enabling it starts the count again (0: never disabled)
PORTAL_WEBHOOK_DISABLE_AFTER = env.int("PORTAL_WEBHOOK_DISABLE_AFTER", default=10)
# how many webhooks a user may have of their own, and a project (a webhook costs the workers a
# POST per notification: these bound what one user or project asks of them)
PORTAL_WEBHOOKS_PER_USER = env.int("PORTAL_WEBHOOKS_PER_USER", default=5)
PORTAL_WEBHOOKS_PER_PROJECT = env.int("PORTAL_WEBHOOKS_PER_PROJECT", default=10)
# test POSTs ("Send a test", `POST …/webhooks/{id}/test/`) per user, API and pages together;
# past it, 429 (empty: no limit of its own beyond PORTAL_API_THROTTLE_RATE)
PORTAL_WEBHOOK_TEST_RATE = env.str("PORTAL_WEBHOOK_TEST_RATE", default="10/minute")
# --- GPU-hour budgets ---------------------------------------------------------------
# a budget with "stop at exhaustion" warns the running workloads when it is used up, and stops
# them this many minutes later
PORTAL_BUDGET_STOP_GRACE_MINUTES = env.int("PORTAL_BUDGET_STOP_GRACE_MINUTES", default=15)
# how many days before a project's allocation ends its managers are told (allocations/)
PORTAL_ALLOCATION_NOTICE_DAYS = env.int("PORTAL_ALLOCATION_NOTICE_DAYS", default=14)
# --- prices and statements ---------------------------------------------------------------
# the currency the prices are in (an ISO 4217 code: a statement records it when its month closes)
PORTAL_BILLING_CURRENCY = env.str("PORTAL_BILLING_CURRENCY", default="EUR")
# hours after a month's end before the beat closes it (freezes its statement)
PORTAL_BILLING_CLOSE_DELAY_HOURS = env.int("PORTAL_BILLING_CLOSE_DELAY_HOURS", default=24)
# --- the calendar -----------------------------------------------------------------
# a reservation occurrence still unused this many minutes after its start is released (its GPUs
# leave the tenant's quota and are bookable again; calendars/reservations.py says "unused")
PORTAL_RESERVATION_GRACE_MINUTES = env.int("PORTAL_RESERVATION_GRACE_MINUTES", default=30)
# when an occurrence ends or is cancelled, the owners of the tenant's workloads beyond the quota
# then in force are told at once, and those still beyond it this many minutes later are put
# back in line (batch) or stopped (services): calendars/reservations.py
PORTAL_RESERVATION_END_GRACE_MINUTES = env.int("PORTAL_RESERVATION_END_GRACE_MINUTES",
                                               default=10)
# webhooks may post to loopback, link-local, private and the cluster's own addresses (off: only
# the public internet, checked at creation and again at each POST; notifications/webhook_urls.py)
PORTAL_WEBHOOK_ALLOW_PRIVATE = env.bool("PORTAL_WEBHOOK_ALLOW_PRIVATE", default=False)
# the image of the SSH server an init container puts into workloads with SSH (sshd/Dockerfile:
# the static gpu-portal-sshd binary alone)
PORTAL_SSH_SERVER_IMAGE = env.str("PORTAL_SSH_SERVER_IMAGE",
                                  default="ghcr.io/gpu-portal/gpu-portal-sshd:0.26.0")
# a project's file server (files/, filesd/): its image; where the portal reaches it ({namespace}:
# the project's; the demo and the tests name a server on loopback); its user (the volumes' files
# are the workloads' user's: the templates' images run as 1000); how long it stays without a
# request before the beat stops it; the largest upload the portal forwards
PORTAL_FILES_IMAGE = env.str("PORTAL_FILES_IMAGE", default="ghcr.io/gpu-portal/gpu-portal-files:0.36.0")
PORTAL_FILES_URL = env.str("PORTAL_FILES_URL",
                           default="http://gpu-portal-files.{namespace}.svc:8080")
# a site whose file servers are not reached by a name made from the namespace (the demo: each
# project's on a loopback port of its own, stack/demo_files.py) names each one's URL in this
# JSON file, {namespace: url}
PORTAL_FILES_ADDRESS_FILE = env.str("PORTAL_FILES_ADDRESS_FILE", default="")
PORTAL_FILES_RUN_AS_USER = env.int("PORTAL_FILES_RUN_AS_USER", default=1000)
PORTAL_FILES_IDLE_MINUTES = env.int("PORTAL_FILES_IDLE_MINUTES", default=30)
PORTAL_FILES_MAX_UPLOAD_BYTES = env.int("PORTAL_FILES_MAX_UPLOAD_BYTES", default=64 * 2**30)
PORTAL_FILES_START_SECONDS = env.int("PORTAL_FILES_START_SECONDS", default=60)
# who of a tenant gets through a workload's proxy unless the tenant says otherwise:
# owner (the owner, the project's managers, admins) | members | readers
PORTAL_SERVICE_ACCESS_DEFAULT = env.str("PORTAL_SERVICE_ACCESS_DEFAULT", default="members")
# queueing on Kueue (tenants/kueue.py, workloads/queue.py): "auto" queues where the cluster serves Kueue's API,
# "kueue" insists on it, "off" refuses what is over quota, as without Kueue
PORTAL_QUEUEING = env.str("PORTAL_QUEUEING", default="auto")
# django-oauth-toolkit's own models (swappable; named so that migrations can refer to them)
OAUTH2_PROVIDER_APPLICATION_MODEL = "oauth2_provider.Application"
OAUTH2_PROVIDER_ACCESS_TOKEN_MODEL = "oauth2_provider.AccessToken"
OAUTH2_PROVIDER_REFRESH_TOKEN_MODEL = "oauth2_provider.RefreshToken"
OAUTH2_PROVIDER_ID_TOKEN_MODEL = "oauth2_provider.IDToken"
OAUTH2_PROVIDER_GRANT_MODEL = "oauth2_provider.Grant"
SILENCED_SYSTEM_CHECKS = ["oauth2_provider.W006"]  # see the grace period below
# the default hashers, then the one for the workloads' OAuth client secrets (256-bit derived
# keys, not passwords: access/hashers.py says why a slow hash is no use for them)
PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2SHA1PasswordHasher",
    "django.contrib.auth.hashers.Argon2PasswordHasher",
    "django.contrib.auth.hashers.BCryptSHA256PasswordHasher",
    "django.contrib.auth.hashers.ScryptPasswordHasher",
    "access.hashers.DerivedSecretHasher",
]
OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "CLIENT_SECRET_HASHER": "pbkdf2_sha256_derived_key",
    "OIDC_RSA_PRIVATE_KEY": PORTAL_OIDC_PRIVATE_KEY,
    "OIDC_ISS_ENDPOINT": PORTAL_OIDC_ISSUER,
    "OAUTH2_VALIDATOR_CLASS": "workloads.oidc.PortalOAuth2Validator",
    "SCOPES": {"openid": "sign in", "profile": "your name", "email": "your e-mail address"},
    "DEFAULT_SCOPES": ["openid"],
    "PKCE_REQUIRED": True,
    "ACCESS_TOKEN_EXPIRE_SECONDS": PORTAL_AUTH_PROXY_OFFLINE_SECONDS,
    "ID_TOKEN_EXPIRE_SECONDS": PORTAL_AUTH_PROXY_OFFLINE_SECONDS,
    "REFRESH_TOKEN_EXPIRE_SECONDS": PORTAL_AUTH_PROXY_SESSION_SECONDS,
    "ROTATE_REFRESH_TOKEN": True,
    # two requests of one browser may refresh at once; the second presents the rotated token
    "REFRESH_TOKEN_GRACE_PERIOD_SECONDS": 30,
    "AUTHORIZATION_CODE_EXPIRE_SECONDS": 60,
    # RFC 9700 (the OAuth 2.0 security BCP): no implicit or password grant, PKCE S256 only,
    # tokens never in URLs, `iss` in the authorization response, a replayed refresh token
    # revokes its family (after the grace period above). Not hashed storage: the grace period
    # answers a retried refresh with the pair it issued, so that pair is kept (W006 silenced)
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
    "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
    "COMPLIANT_BCP_RFC9700_REFRESH_TOKEN": True,
    "COMPLIANT_BCP_RFC9700_REDIRECT_URI_MATCHING": True,
    "COMPLIANT_BCP_RFC9700_PKCE_REQUIRED": True,
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    # plain-HTTP callbacks only where the workloads' addresses are plain HTTP: the proxies
    # have no certificate, and no shared gateway serves HTTPS in front of them (the demo);
    # `manage.py check --deploy` warns about that
    "COMPLIANT_BCP_RFC9700_REDIRECT_URI_SCHEME": _WORKLOADS_HTTPS,
    "ALLOWED_REDIRECT_URI_SCHEMES": ["https"] if _WORKLOADS_HTTPS else ["http", "https"],
}

# --- Celery -------------------------------------------------------------------------------
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default=REDIS_URL)
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Keep database connections across tasks (CONN_MAX_AGE decides, see portal/celery.py) instead
# of Celery's default of a new connection per task; force a reconnect every this many tasks.
CELERY_DB_REUSE_MAX = env.int("CELERY_DB_REUSE_MAX", default=1000)
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE_FILENAME = env.str(
    "CELERY_BEAT_SCHEDULE_FILENAME", default=str(BASE_DIR / ".demo" / "celerybeat-schedule")
)

# --- REST API -----------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "tenants.authentication.TenantTokenAuthentication",
        "api.authentication.PortalSessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["api.permissions.HasProject"],
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    # JSON nested past api/parsers.py's MAX_JSON_DEPTH is a 400, not a RecursionError
    "DEFAULT_PARSER_CLASSES": [
        "api.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "api.pagination.PortalPagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "api.errors.exception_handler",
    "UNAUTHENTICATED_USER": None,
    # per-user rate limit (429 + Retry-After); the rate: PORTAL_API_THROTTLE_RATE below
    "DEFAULT_THROTTLE_CLASSES": ["api.throttling.PortalUserRateThrottle"],
}
# requests per user per second|minute|hour|day across all replicas; empty = no limit
PORTAL_API_THROTTLE_RATE = env.str("PORTAL_API_THROTTLE_RATE", default="600/minute")
SPECTACULAR_SETTINGS = {
    "TITLE": "GPU portal API",
    "DESCRIPTION": "Launch and manage GPU workloads on the shared Kubernetes cluster.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # the schema is public: scripts and the CLI discover the API before they have a token
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    # /api/docs/ serves Swagger UI from drf-spectacular-sidecar's local copy (no CDN)
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # "kind" names a workload's kind (service/batch) and a notification's: one enum each
    "ENUM_NAME_OVERRIDES": {"NotificationKindEnum": "notifications.models.Kind",
                            "KindEnum": "catalogue.models.Template.Kind",
                            "WebhookStateEnum": "notifications.models.Webhook.State",
                            "DeliveryStateEnum": "notifications.models.Delivery.State",
                            "VolumeScopeEnum": "storage.models.Volume.Scope",
                            "SecretScopeEnum": "credentials.models.Secret.Scope",
                            "DatasetKindEnum": "storage.models.Dataset.Kind",
                            "RequestKindEnum": "allocations.models.ResourceRequest.Kind",
                            "RequestStateEnum": "allocations.models.ResourceRequest.State"},
    # the default hook (enums as components), then every operation's error answers
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums",
                             "api.schema.error_responses"],
}

# --- static files -------------------------------------------------------------------------
STATIC_URL = "static/"
STATIC_ROOT = env.str("PORTAL_STATIC_ROOT", default=str(BASE_DIR / "staticfiles"))
STATICFILES_DIRS = [
    BASE_DIR / "static",
    # installed from npm by `make` (package.json / package-lock.json)
    ("vendor/htmx", BASE_DIR / "node_modules" / "htmx.org" / "dist"),
    ("vendor/uplot", BASE_DIR / "node_modules" / "uplot" / "dist"),
]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if not DEBUG
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}

LANGUAGE_CODE = "en"
TIME_ZONE = env.str("PORTAL_TIME_ZONE", default="UTC")
USE_I18N = True
USE_TZ = True

# error reports (the DEBUG page, admin e-mails) and log lines never carry a credential, with
# DEBUG on too (portal/error_reports.py)
DEFAULT_EXCEPTION_REPORTER_FILTER = "portal.error_reports.PortalExceptionReporterFilter"
DEFAULT_EXCEPTION_REPORTER = "portal.error_reports.PortalExceptionReporter"
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "filters": {"scrub_secrets": {"()": "portal.error_reports.ScrubSecrets"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain",
                             "filters": ["scrub_secrets"]}},
    "root": {"handlers": ["console"], "level": env.str("PORTAL_LOG_LEVEL", default="INFO")},
    "loggers": {"axes": {"level": "WARNING"}},
}
