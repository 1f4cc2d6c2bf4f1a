"""Test settings: the production settings, with loopback ports chosen for this test run.

The real PostgreSQL, Redis and Keystone are started by session fixtures
(tests/fixtures/stack.py) on the ports chosen here, before any test touches them.
"""

import os

from stack.procs import free_port

# Under pytest-xdist every worker runs its own PostgreSQL, Redis and Keystone: a worker picks its
# own ports (it inherits the controller's). What a worker starts inherits the worker's, and keeps them.
_RUN = os.environ.get("PYTEST_XDIST_WORKER", "main")
if os.environ.get("TEST_PORTS_OF") != _RUN:
    os.environ["TEST_PORTS_OF"] = _RUN
    for _var in ("TEST_POSTGRES_PORT", "TEST_REDIS_PORT", "TEST_KEYSTONE_PORT"):
        if _RUN != "main" or _var not in os.environ:
            os.environ[_var] = str(free_port())
    os.environ["CELERY_BEAT_SCHEDULE_FILENAME"] = f"/tmp/gpu-portal-test-celerybeat-{_RUN}-{os.getpid()}"

os.environ.setdefault("PORTAL_SECRET_KEY", "test-secret-key-" + "k" * 50)
os.environ.setdefault("PORTAL_TLS", "0")
os.environ["DATABASE_URL"] = (
    f"postgres://portal@127.0.0.1:{os.environ['TEST_POSTGRES_PORT']}/portal"
)
os.environ["REDIS_URL"] = f"redis://127.0.0.1:{os.environ['TEST_REDIS_PORT']}/0"
os.environ["KEYSTONE_URL"] = f"http://127.0.0.1:{os.environ['TEST_KEYSTONE_PORT']}/v3"
os.environ.setdefault("KEYSTONE_SERVICE_PASSWORD", "gpu-portal-service-pass")
if not os.environ.get("PORTAL_OIDC_PRIVATE_KEY"):
    # the OpenID Connect signing key of this test run (access)
    from stack.oidc_key import new_private_key_pem

    os.environ["PORTAL_OIDC_PRIVATE_KEY"] = new_private_key_pem()

from portal.settings import *  # noqa: E402,F403

# Tests exercise the same code paths; only what makes runs slow or flaky is changed.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher",
                    "access.hashers.DerivedSecretHasher"]
STORAGES["staticfiles"]["BACKEND"] = "django.contrib.staticfiles.storage.StaticFilesStorage"  # noqa: F405
# tasks go to the test Redis; tests that want them inline ask for the `eager_celery` fixture
CELERY_TASK_ALWAYS_EAGER = False
# serve static files from the source folders: no collectstatic before a test run
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
# no test asks a registry on the network by chance (a secret of registry.example.org, a server
# the API fuzzing makes up): the tests of the registry check turn it on against the registries
# on loopback (tests/support/registry.py)
PORTAL_REGISTRY_CHECK_SECONDS = 0
