"""The web process's entry point does its one-time work as it starts (portal/wsgi.py), not in
its first requests: Celery's registry of tasks, the URLs' indexes for reverse()."""

from __future__ import annotations

import subprocess
import sys

from stack.procs import REPO
from tests.support.web_server import production_env

# run in a fresh interpreter: this one has imported and built all of it long ago
LOADED = """
import sys
import portal.wsgi
from django.urls import reverse
from django.urls.resolvers import URLResolver
from portal.celery import app

built = []
populate = URLResolver._populate
URLResolver._populate = lambda self: built.append(self) or populate(self)
reverse("healthz")
reverse("api:notification-delivery-detail", args=[1])  # a webhook test's answer names it
reverse("notifications:list")
print(app.finalized, "notifications.tasks" in sys.modules, "workloads.tasks" in sys.modules,
      len(built))
"""


def test_the_web_process_loads_the_task_registry_and_the_url_indexes_as_it_starts():
    result = subprocess.run([sys.executable, "-c", LOADED], cwd=REPO, env=production_env(),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    # Celery's registry built, every app's tasks imported; no URL index left to build
    assert result.stdout.split() == ["True", "True", "True", "0"]
