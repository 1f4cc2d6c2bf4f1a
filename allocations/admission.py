"""What a project's allocation says at launch: registered with workloads' hooks in apps.py
(workloads cannot import this app). Past the allocation's last day the launch is refused with
403 `allocation_ended` (category admission) until the end is moved: running work goes on."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from tenants.models import Tenant
from workloads.services import AdmissionRefused

from .models import ProjectRecord


class AllocationEnded(AdmissionRefused):
    """A launch in a project whose allocation is past its last day."""

    code = "allocation_ended"


def ended_text(tenant: Tenant, record: ProjectRecord) -> str:
    return (f"The allocation of {tenant.name} ended on {record.allocation_ends:%Y-%m-%d}: new "
            "launches are held until it is renewed (an admin or the department's admins set a "
            "later end; ask them with a request). Running workloads go on.")


def allocation_admission_check(*, tenant: Tenant, user: Any, request: dict[str, Any]) -> None:
    record = ProjectRecord.objects.filter(tenant=tenant).only("allocation_ends").first()
    if record is not None and record.ended(timezone.localdate()):
        raise AllocationEnded(ended_text(tenant, record))
