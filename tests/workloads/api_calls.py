"""What the workload API tests share: the demo's vision-lab, and API calls that run the work
the view enqueues on commit (a test's transaction never commits, so nothing else would)."""

from django.test import Client, TestCase

from tenants.models import Tenant
from tenants.provisioning import tenant_reconcile
from tenants.services import quota_update

DEMO_QUOTA = {"gpus_total": 8, "gpus_by_type": {"a100": 4, "v100": 4, "t4": 0}}


def vision_lab_ready(login) -> Tenant:
    """vision-lab as the demo has it: recorded (a member logged in), its demo quota, and its
    namespace provisioned in the cluster the settings point at."""
    login("researcher")
    tenant = Tenant.objects.get(name="vision-lab")
    quota_update(tenant=tenant, acting_user=None, changes=DEMO_QUOTA)
    tenant_reconcile(tenant_id=tenant.pk)
    return tenant


def launch(headers: dict, body: dict, **extra):
    with TestCase.captureOnCommitCallbacks(execute=True):
        return Client().post("/api/v1/workloads/", body, content_type="application/json",
                             **headers, **extra)


def post(path: str, headers: dict):
    with TestCase.captureOnCommitCallbacks(execute=True):
        return Client().post(path, **headers)


def delete(path: str, headers: dict):
    with TestCase.captureOnCommitCallbacks(execute=True):
        return Client().delete(path, **headers)
