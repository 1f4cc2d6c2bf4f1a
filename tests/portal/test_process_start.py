"""What a portal process loads as it starts. Every web worker, Celery worker, tracker, beat and
`manage.py` command runs `django.setup()`, which imports the portal's door to Kubernetes
(kube/client.py); that door speaks to the API server through the client's ApiClient and never
loads the client's typed API classes and models, whose pydantic validators cost about a
second of CPU in each process."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.deploy.manifests import REPO
from tests.support.web_server import production_env

LOADED = """
import json, sys
import django
django.setup()
print(json.dumps(sorted(sys.modules)))
"""


def test_a_portal_process_starts_without_the_kubernetes_clients_typed_classes():
    started = subprocess.run([sys.executable, "-c", LOADED], cwd=REPO, env=production_env(),
                             capture_output=True, text=True, timeout=120)
    assert started.returncode == 0, started.stderr[-3000:]
    modules = json.loads(started.stdout)
    assert "kube.client" in modules and "kubernetes.client.api_client" in modules
    typed = [m for m in modules
             if m.startswith(("kubernetes.client.api.", "kubernetes.client.models."))]
    assert typed == []
