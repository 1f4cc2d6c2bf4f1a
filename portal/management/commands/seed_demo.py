"""Seed the demo: the GPU type catalogue, tenants from Keystone, the demo quotas, root
templates (DIGITS) allowed in vision-lab, and the cluster's default storage class offered for
volumes while none is; the worker clusters it is given (`--cluster east=KUBECONFIG`, as `make
demo CLUSTER=kube` runs it) registered with their GPU types; then every tenant's namespace is
reconciled.

Idempotent. A quota is seeded only while nobody has changed it, so restarting the demo never
undoes an admin's edit. The reconcile at every start matters when the demo talks to another
cluster than last time (`make demo` then `make demo CLUSTER=kube`): the tenants are recorded as
provisioned, but the new cluster has none of their namespaces.
"""

from fractions import Fraction
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from audit.models import AuditRecord
from catalogue.models import GpuType
from catalogue.sharing import MIG, TIME_SLICED
from clusters.models import Cluster
from clusters.services import ClusterInvalid, cluster_register
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

# the worker clusters' own types (`--cluster`): east's 2 × 8 H100, a type only it has; the
# quotas the demo's projects get of them
WORKER_GPU_TYPES = {
    "east": [("h100", "NVIDIA H100 80GB", 80, {"gputype": "h100"})],
}
WORKER_QUOTAS = {"vision-lab": {"h100": 8}, "nlp-lab": {"h100": 4}}

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
DEMO_QUOTAS: dict[str, dict[str, Any]] = {
    "vision-lab": {"gpus_total": 8, "gpus_by_type": {"a100": 4, "v100": 4, "t4": 0,
                                                     "t4-shared": 4, "a100-1g-10gb": 7}},
    "nlp-lab": {"gpus_total": 6, "gpus_by_type": {"a100": 2, "v100": 0, "t4": 4,
                                                  "t4-shared": 8, "a100-1g-10gb": 7}},
}


class Command(BaseCommand):
    help = "Seed the demo's GPU types, tenants and quotas (idempotent)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--cluster", action="append", default=[], metavar="NAME=KUBECONFIG",
                            help="a worker cluster to register (its portal kubeconfig's path)")

    def handle(self, *args: Any, **options: Any) -> None:
        workers = dict(self._worker(entry) for entry in options["cluster"])
        worker_types = [t for name in workers for t in WORKER_GPU_TYPES.get(name, [])]
        for slug, name, memory, selector in GPU_TYPES + worker_types:
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
        for name, kubeconfig in workers.items():
            self._register(name, kubeconfig)
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
            worker_slugs = {t[0] for t in worker_types}
            extra = {slug: gpus for slug, gpus in WORKER_QUOTAS.get(name, {}).items()
                     if slug in worker_slugs}
            changes = {**changes, "gpus_by_type": {**changes["gpus_by_type"], **extra}}
            quota_update(tenant=tenant, acting_user=None, changes=changes)
            self.stdout.write(f"quota of {name}: {changes}")
        self._worker_quotas({t[0] for t in worker_types})
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

    def _worker_quotas(self, slugs: set[str]) -> None:
        """The demo projects' quota of the workers' types, where they have none of them yet (a
        demo that ran on one cluster before; an admin's figure, 0 too, is left as it is)."""
        for name, quotas in WORKER_QUOTAS.items():
            tenant = Tenant.objects.filter(name=name).first()
            if tenant is None:
                continue
            by_type = tenant.quota.gpus_by_type()
            missing = {slug: gpus for slug, gpus in quotas.items()
                       if slug in slugs and slug not in by_type}
            if missing:
                quota_update(tenant=tenant, acting_user=None,
                             changes={"gpus_by_type": {**by_type, **missing}})
                self.stdout.write(f"quota of {name}: {missing}")

    @staticmethod
    def _worker(entry: str) -> tuple[str, str]:
        name, _, kubeconfig = entry.partition("=")
        if not name or not kubeconfig:
            raise CommandError(f"--cluster takes NAME=KUBECONFIG, not {entry!r}")
        return name, kubeconfig

    def _register(self, name: str, kubeconfig: str) -> None:
        """The worker cluster as a Cluster row (once; a later demo's new kubeconfig path is
        written over the old one), offering its own types."""
        slugs = [t[0] for t in WORKER_GPU_TYPES.get(name, [])]
        found = Cluster.objects.filter(name=name).first()
        try:
            if found is None:
                cluster_register(user=None, fields={"name": name, "kubeconfig_path": kubeconfig,
                                                    "gpu_types": slugs})
                self.stdout.write(f"cluster {name} registered ({', '.join(slugs)})")
            elif found.kubeconfig_path != kubeconfig:
                Cluster.objects.filter(pk=found.pk).update(kubeconfig_path=kubeconfig)
        except ClusterInvalid as exc:
            raise CommandError(f"cluster {name}: {exc.errors}") from exc
