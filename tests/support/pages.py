"""The pages' tests: vision-lab signed in as the researcher or the admin, forms as a browser
sends them, and the error shown beside a field."""

from __future__ import annotations

import re
import time

import pytest

from catalogue.models import Template
from tenants.models import Tenant
from tenants.provisioning import tenant_reconcile
from tenants.services import quota_update
from tests.fixtures import factories
from workloads.models import Workload


@pytest.fixture
def vision_lab(login, gpu_types, cluster, eager_celery):
    """vision-lab with the demo quota and its namespace in kubesim (the test's own: `cluster`
    removes it afterwards)."""
    login("researcher")  # records vision-lab and nlp-lab (after the GPU types: quota per type)
    tenant = Tenant.objects.get(name="vision-lab")
    quota_update(tenant=tenant, acting_user=None, changes={
        "gpus_total": 8, "gpus_by_type": {"a100": 4, "v100": 4, "t4": 0}})
    tenant_reconcile(tenant_id=tenant.pk)  # the namespace, with the ResourceQuota of this quota
    return tenant


@pytest.fixture
def researcher(vision_lab, as_user):
    return as_user("researcher")


def make_workload(tenant, username, *, name="training", state=Workload.State.RUNNING,
                  **fields):
    """A workload row as the tracker would have left it (no cluster objects): a pending one
    says why, a running one has its address."""
    return factories.make_workload(
        tenant, username, name=name, state=state, object_name="wl-{pk}",
        reason="Waiting for the cluster" if state == "pending" else "",
        address="192.168.1.245" if state == Workload.State.RUNNING else "",
        access_token="tok-" + name, **fields)


def launch_form(**changes):
    form = {"name": "notebook", "template": "jupyter", "shown_template": "jupyter",
            "gpu_type": "a100", "gpu_count": "1", "cpu": "4", "memory": "16",
            "max_runtime_minutes": "", "idempotency_key": "k-" + str(time.monotonic_ns())}
    form.update(changes)
    return form


def field_error(page: str, field: str) -> str:
    match = re.search(rf'<div class="field-error" id="err-{field}">(.*?)</div>', page, re.S)
    assert match, f"no error shown for {field}"
    return match.group(1)


@pytest.fixture
def admin(login, gpu_types, cluster):
    login("researcher")  # records vision-lab and nlp-lab as tenants
    return login("admin")


def template_form(template: Template, **changes) -> dict:
    form = {"name": template.name, "description": template.description, "kind": template.kind,
            "image": template.image, "command": "\n".join(template.command),
            "args": "\n".join(template.args),
            "allowed_args": "\n".join(template.allowed_args),
            "env": "\n".join(f"{k}={v}" for k, v in template.env.items()),
            "port": "" if template.port is None else str(template.port),
            "default_cpu": str(template.default_cpu),
            "default_memory_gb": str(template.default_memory_gb),
            "allow_root": "on" if template.allow_root else None,
            "run_as_user": "" if template.run_as_user is None else str(template.run_as_user),
            "enabled": "on" if template.enabled else None}
    form.update(changes)
    return {key: value for key, value in form.items() if value is not None}
