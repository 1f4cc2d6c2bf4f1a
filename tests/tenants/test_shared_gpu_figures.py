"""Shared GPU types in the quota figures: quotas per type count units, the total counts
GPU-equivalents (units × the type's part of a GPU), and the figures carry those parts exactly,
read in the figures' one query or from what was prefetched."""

from __future__ import annotations

from fractions import Fraction

import pytest
from django.test import TestCase
from django.utils import timezone

from catalogue.models import GpuType, Template
from identity.models import User
from tenants.figures import USE_ADMISSION, QuotaUse
from tenants.models import Tenant
from tenants.selectors import quota_figures, tenants_with_quota_figures
from tests.support.database import demo_shared_gpu_types
from workloads.services import AdmissionRefused, workload_launch

pytestmark = pytest.mark.django_db


@pytest.fixture
def shared_types(gpu_types):
    return demo_shared_gpu_types(gpu_types)


@pytest.fixture
def tenant(shared_types) -> Tenant:
    from tests.fixtures import factories

    return factories.make_tenant(f"shared-{timezone.now():%H%M%S%f}",
                                 gpus_by_type={"t4-shared": 8, "a100-1g-10gb": 7, "a100": 1},
                                 gpus_total=2, cpu=64, memory_gb=256, max_workloads=20)


def test_the_total_of_use_counts_gpu_equivalents():
    use = QuotaUse(source=USE_ADMISSION, gpus_by_type={"t4-shared": 3, "a100-1g-10gb": 7,
                                                       "a100": 1},
                   fractions={"t4-shared": Fraction(1, 4), "a100-1g-10gb": Fraction(1, 7)})
    assert use.gpus_total == Fraction(11, 4)  # 3/4 + 1 + 1: seven sevenths are one GPU exactly
    assert use.gpus("t4-shared") == 3  # the type's own figure stays in units


def test_the_figures_carry_each_types_part_of_a_gpu(tenant, django_assert_num_queries):
    tenant = Tenant.objects.select_related("quota").get(pk=tenant.pk)
    used = QuotaUse(source=USE_ADMISSION, gpus_by_type={"t4-shared": 2})
    with django_assert_num_queries(1):
        read = quota_figures(tenant, used=used)
    tenant = tenants_with_quota_figures(Tenant.objects.filter(pk=tenant.pk)).get()
    with django_assert_num_queries(0):
        prefetched = quota_figures(tenant, used=used)
    assert read.fractions == prefetched.fractions == {
        "t4-shared": Fraction(1, 4), "a100-1g-10gb": Fraction(1, 7), "a100": Fraction(1)}
    assert read.used is not None and read.used.gpus_total == Fraction(1, 2)
    assert read.equivalents("a100-1g-10gb", 14) == 2
    assert read.gpus("t4-shared") == 8  # quotas per type stay in units


def _launch(tenant: Tenant, slug: str, units: int) -> None:
    user, _ = User.objects.get_or_create(username="shared-researcher",
                                         defaults={"name": "researcher"})
    request = {"template": Template.objects.get(slug="custom"), "name": "probe",
               "kind": "batch", "image": "busybox:1.36",
               "gpu_type": GpuType.objects.get(slug=slug), "gpu_count": units, "cpu": 1,
               "memory": 1}
    with TestCase.captureOnCommitCallbacks(execute=False):
        workload_launch(tenant=tenant, user=user, request=request)


def test_admission_weighs_shared_units_by_their_part_of_a_gpu(tenant):
    # 2 GPUs in all: 4 quarter-T4s (1) and 7 slices of an A100 (1) fit; a whole A100 does not
    _launch(tenant, "t4-shared", 4)
    _launch(tenant, "a100-1g-10gb", 7)
    with pytest.raises(AdmissionRefused) as refused:
        _launch(tenant, "a100", 1)
    assert str(refused.value).endswith("uses 2 of 2 GPUs in all; 1 more would exceed the quota.")
    with pytest.raises(AdmissionRefused) as refused:
        _launch(tenant, "t4-shared", 1)
    assert str(refused.value).endswith("uses 2 of 2 GPUs in all; 0.25 more would exceed the "
                                       "quota.")


def test_kueue_counts_a_shared_types_units_in_its_own_resource():
    # Kueue knows resources, not parts of GPUs: the flavor of quarter-T4s holds 8 units of
    # nvidia.com/gpu.shared, beside 2 whole A100s of nvidia.com/gpu
    from tenants.kueue import FlavorSpec, QueueSpec, make_cluster_queue

    flavors = [FlavorSpec("a100", "nvidia.com/gpu", (("gputype", "a100"),)),
               FlavorSpec("t4-shared", "nvidia.com/gpu.shared", (("gputype", "t4-shared"),))]
    queue = make_cluster_queue(QueueSpec(
        name="ns", namespace="ns", gpus=(("a100", 2), ("t4-shared", 8)), cpu=8, memory_gb=32,
        borrowing_limit=None, lending_limit=None), flavors)
    nominal = {(flavor["name"], entry["name"]): entry["nominalQuota"]
               for group in queue["spec"]["resourceGroups"] for flavor in group["flavors"]
               for entry in flavor["resources"]}
    assert nominal[("gpu-t4-shared", "nvidia.com/gpu.shared")] == "8"
    assert nominal[("gpu-a100", "nvidia.com/gpu")] == "2"


def test_where_the_cluster_queues_a_launch_heavier_than_the_total_is_refused(tenant, settings):
    # Kueue counts units per type and knows no total: the portal refuses what alone weighs
    # more GPUs than the total, and lets what fits within it queue, however much runs already
    settings.PORTAL_QUEUEING = "kueue"
    assert Tenant.objects.get(pk=tenant.pk).quota.gpu_borrowing_limit is None
    _launch(tenant, "t4-shared", 8)  # 2 GPUs: the whole total
    _launch(tenant, "a100", 1)  # past the total with what runs: it waits its turn in the queue
    with pytest.raises(AdmissionRefused) as refused:
        _launch(tenant, "a100-1g-10gb", 15)
    assert str(refused.value).endswith("has 2 GPUs in all; 15 a100-1g-10gb weigh 2.14 GPUs and "
                                       "can never be admitted.")
    _launch(tenant, "a100-1g-10gb", 14)  # 2 GPUs exactly: within reach
