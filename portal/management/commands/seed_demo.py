"""Seed the demo: the GPU type catalogue, tenants from Keystone, the demo quotas, root
templates (DIGITS) allowed in vision-lab, and the cluster's default storage class offered for
volumes while none is; then every tenant's namespace is reconciled.

Idempotent. A quota is seeded only while nobody has changed it, so restarting the demo never
undoes an admin's edit. The reconcile at every start matters when the demo talks to another
cluster than last time (`make demo` then `make demo CLUSTER=kube`): the tenants are recorded as
provisioned, but the new cluster has none of their namespaces.
"""

from fractions import Fraction
from typing import Any

from django.core.management.base import BaseCommand

from audit.models import AuditRecord
from catalogue.models import GpuType
from catalogue.sharing import MIG, TIME_SLICED
from kube.client import Kube, KubeError
from storage.models import StorageClass
from storage.services import VolumeInvalid, storage_class_set
from tenants.keystone_sync import tenants_sync_from_keystone
from tenants.models import Tenant
from tenants.services import quota_update, tenant_root_templates_update
from tenants.tasks import tenants_reconcile_all

GPU_TYPES = [
    # slug, name, memory GiB, node selector
    ("a100", "NVIDIA A100 80GB", 80, {"gputype": "a100"}),
    ("v100", "NVIDIA V100 32GB", 32, {"gputype": "v100"}),
    ("t4", "NVIDIA T4 16GB", 16, {"gputype": "t4"}),
]
# the shared types (the demo inventory's time-sliced T4 node and MIG A100 node): slug, name,
# memory GiB, node selector, resource, sharing, the part of a GPU a unit is, physical type.
# A quarter T4 shares the whole T4's 16 GB with its neighbours (no memory isolation under
# time-slicing); a 1g.10gb slice has 10 GB of its own
SHARED_GPU_TYPES = [
    ("t4-shared", "NVIDIA T4, a quarter (time-sliced)", 16, {"gputype": "t4-shared"},
     "nvidia.com/gpu.shared", TIME_SLICED, Fraction(1, 4), "t4"),
    ("a100-1g-10gb", "NVIDIA A100, MIG 1g.10gb slice", 10, {"gputype": "a100-mig"},
     "nvidia.com/mig-1g.10gb", MIG, Fraction(1, 7), "a100"),
]

# the demo cluster's default class: kubesim's own (its provisioner binds every claim, and grows
# them) or, with CLUSTER=kube, gpu-portal-provisioner's (a folder per claim on a shared file
# system, which does not grow); offered expandable only where the cluster's class is. A cluster
# without it offers nothing until an admin chooses its classes (/admin/storage-classes/)
DEMO_STORAGE_CLASS = ("standard", "the demo cluster's shared volumes")

# DIGITS runs as root: the demo lets vision-lab run it (its namespace then enforces Pod
# Security "baseline"); nlp-lab keeps the site's "restricted" and shows the refusal
ROOT_TEMPLATES_ALLOWED = ("vision-lab",)

# the shared types' quotas count units (4 quarter-T4s, 7 slices); the totals count
# GPU-equivalents, so a project's shared units weigh their part of a GPU in its total
DEMO_QUOTAS = {
    "vision-lab": {"gpus_total": 8, "gpus_by_type": {"a100": 4, "v100": 4, "t4": 0,
                                                     "t4-shared": 4, "a100-1g-10gb": 7}},
    "nlp-lab": {"gpus_total": 6, "gpus_by_type": {"a100": 2, "v100": 0, "t4": 4,
                                                  "t4-shared": 8, "a100-1g-10gb": 7}},
}


class Command(BaseCommand):
    help = "Seed the demo's GPU types, tenants and quotas (idempotent)."

    def handle(self, *args: Any, **options: Any) -> None:
        for slug, name, memory, selector in GPU_TYPES:
            GpuType.objects.update_or_create(slug=slug, defaults={
                "name": name, "memory_gb": memory, "node_selector": selector,
                "resource_name": "nvidia.com/gpu"})
        for slug, name, memory, selector, resource, sharing, fraction, physical in \
                SHARED_GPU_TYPES:
            GpuType.objects.update_or_create(slug=slug, defaults={
                "name": name, "memory_gb": memory, "node_selector": selector,
                "resource_name": resource, "sharing": sharing,
                "fraction_numerator": fraction.numerator,
                "fraction_denominator": fraction.denominator,
                "physical": GpuType.objects.get(slug=physical)})
        counts = tenants_sync_from_keystone()
        self.stdout.write(f"tenants from Keystone: {counts}")
        for name, changes in DEMO_QUOTAS.items():
            tenant = Tenant.objects.filter(name=name).first()
            if tenant is None:
                self.stderr.write(f"no tenant {name}: is Keystone seeded?")
                continue
            if (name in ROOT_TEMPLATES_ALLOWED and not AuditRecord.objects.filter(
                    tenant=tenant, action="tenant.allow_root_templates").exists()):
                tenant_root_templates_update(tenant=tenant, acting_user=None, allow=True)
                self.stdout.write(f"{name} may run templates that run as root (DIGITS)")
            if AuditRecord.objects.filter(tenant=tenant, action="quota.update").exists():
                continue  # changed before (by an admin or an earlier seed): leave it
            quota_update(tenant=tenant, acting_user=None, changes=changes)
            self.stdout.write(f"quota of {name}: {changes}")
        if not StorageClass.objects.exists():
            name, description = DEMO_STORAGE_CLASS
            try:
                found = Kube().get("StorageClass", name)
                storage_class_set(user=None, name=name, description=description,
                                  expandable=bool(found and found.get("allowVolumeExpansion")),
                                  is_default=True)
                self.stdout.write(f"storage class {name} offered for volumes")
            except (VolumeInvalid, KubeError) as exc:
                self.stdout.write(f"no storage class offered for volumes: {exc}")
        # the worker provisions each tenant's namespace (retrying until the cluster answers)
        self.stdout.write(f"tenants to reconcile on the cluster: {tenants_reconcile_all()}")
