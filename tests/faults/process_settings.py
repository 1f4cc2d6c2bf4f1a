"""Settings of the portal processes that the fault tests start (Celery workers, a gunicorn web
server): the test settings, on the test database pytest-django created for this run.

The test settings read their loopback ports from the environment the test process exported
(TEST_POSTGRES_PORT, TEST_REDIS_PORT, TEST_KEYSTONE_PORT), so these processes talk to the same
PostgreSQL, Redis and Keystone as the test; KUBECONFIG names the cluster.
"""

import os

from tests.settings import *  # noqa: F403

DATABASES["default"]["NAME"] = os.environ["FAULTS_DATABASE_NAME"]  # noqa: F405
