"""Fixtures of the billing tests: known workloads and a volume of November 2025."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from allocations.models import ProjectRecord
from storage.models import Volume, VolumeSize
from tenants.models import Department, Tenant
from tests.fixtures.factories import make_workload
from tests.support.billing import at
from tests.support.database import demo_shared_gpu_types


@pytest.fixture
def november(login, gpu_types, settings) -> dict[str, Tenant]:
    """Known workloads of November 2025 in vision-lab and nlp-lab, a volume of vision-lab's,
    vision-lab in a department with a PI and grants."""
    settings.TIME_ZONE = "UTC"
    for user in ("researcher", "lead", "student"):
        login(user)
    demo_shared_gpu_types(gpu_types)
    labs = {t.name: t for t in Tenant.objects.filter(name__in=["vision-lab", "nlp-lab"])}
    vision, nlp = labs["vision-lab"], labs["nlp-lab"]
    lead = get_user_model().objects.get(name="lead")
    Tenant.objects.filter(pk=vision.pk).update(
        department=Department.objects.create(name="Computer Science"))
    ProjectRecord.objects.create(tenant=vision, principal_investigator=lead,
                                 grants=["ERC-101", "CC-4410"])
    done = "succeeded"
    # vision-lab: 2 × a100 for 6.5 h; 3 quarter T4s for 48 h; a v100 from October into
    # November (2 h of it in November); 4 CPUs each
    make_workload(vision, "researcher", gpu_type="a100", gpu_count=2, state=done,
                  started_at=at(3, 10), finished_at=at(3, 16, 30))
    make_workload(vision, "researcher", gpu_type="t4-shared", gpu_count=3, state=done,
                  started_at=at(10), finished_at=at(12))
    make_workload(vision, "lead", gpu_type="v100", state=done,
                  started_at=at(31, 20, month=10), finished_at=at(1, 2))
    # in December: not November's
    make_workload(vision, "lead", gpu_type="a100", state=done,
                  started_at=at(2, month=12), finished_at=at(3, month=12))
    # nlp-lab: one a100 for 20 minutes; a two-node run (1 a100 each) from 22:00 on the last
    # day, still running (clipped at the month's end: 2 h × 2 GPUs)
    make_workload(nlp, "student", gpu_type="a100", state=done,
                  started_at=at(5, 9), finished_at=at(5, 9, 20))
    make_workload(nlp, "student", gpu_type="a100", nodes=2, started_at=at(30, 22))
    # vision-lab's project volume: 100 GiB since October (a whole November)
    volume = Volume.objects.create(tenant=vision, owner=lead, scope=Volume.Scope.PROJECT,
                                   name="data", size_gib=100, storage_class="standard",
                                   state=Volume.State.BOUND)
    VolumeSize.objects.create(volume_id=volume.pk, tenant=vision, owner=lead,
                              scope=Volume.Scope.PROJECT, size_gib=100, since=at(1, month=10))
    return labs
