"""The tenants' home volume becomes a project Volume named "home": every tenant one of whose
workloads asked for it (its claim was made then) gets the Volume, on the same claim, so that
nothing on it is lost; the workloads not finished that mount it get their mount rows, so that
it is not deleted under them. The tracker fills its state in when it sees the claim."""

import math
from typing import Any

from django.conf import settings
from django.db import migrations
from kubernetes.utils.quantity import parse_quantity

HOME_CLAIM_NAME = "gpu-portal-home"  # as workloads named it (kube.labels.HOME_CLAIM_NAME)
HOME_MOUNT_PATH = "/home/portal"
FINAL_STATES = ("succeeded", "failed", "stopped")


def home_volumes(apps, schema_editor):
    Workload = apps.get_model("workloads", "Workload")
    WorkloadMount = apps.get_model("workloads", "WorkloadMount")
    Volume = apps.get_model("storage", "Volume")
    size = max(1, math.ceil(parse_quantity(settings.PORTAL_HOME_VOLUME_SIZE) / 1024 ** 3))
    first_use: dict[int, Any] = {}
    for workload in Workload.objects.filter(use_home=True).order_by("created_at", "pk"):
        first_use.setdefault(workload.tenant_id, workload)
    for tenant_id, workload in first_use.items():
        home = Volume.objects.filter(tenant_id=tenant_id, claim_name=HOME_CLAIM_NAME,
                                     deleted_at__isnull=True).first()
        if home is None:
            taken = Volume.objects.filter(tenant_id=tenant_id, name="home", scope="project",
                                          deleted_at__isnull=True).exists()
            home = Volume.objects.create(
                tenant_id=tenant_id, owner_id=workload.owner_id, scope="project",
                name=f"home-{tenant_id}" if taken else "home", size_gib=size,
                storage_class=settings.PORTAL_HOME_STORAGE_CLASS, claim_name=HOME_CLAIM_NAME)
        live = Workload.objects.filter(tenant_id=tenant_id, use_home=True).exclude(
            state__in=FINAL_STATES)
        WorkloadMount.objects.bulk_create(
            WorkloadMount(workload=row, volume=home, volume_name=home.name,
                          claim_name=HOME_CLAIM_NAME, path=HOME_MOUNT_PATH)
            for row in live if not WorkloadMount.objects.filter(
                workload=row, path=HOME_MOUNT_PATH).exists())


def forget_home_volumes(apps, schema_editor):
    """Back: the rows go, the claim stays (workloads made it, and will find it again)."""
    apps.get_model("workloads", "WorkloadMount").objects.filter(
        claim_name=HOME_CLAIM_NAME).delete()
    apps.get_model("storage", "Volume").objects.filter(claim_name=HOME_CLAIM_NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("workloads", "0015_workloadmount"),
        ("storage", "0001_initial"),
    ]

    operations = [migrations.RunPython(home_volumes, forget_home_volumes)]
