"""The workload domain's querysets: `restrict(identity, action)` (identity/scoping.py)."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Self

from django.db.models import DateTimeField, DurationField, ExpressionWrapper, F, Value
from django.db.models.expressions import CombinedExpression
from django.db.models.functions import Coalesce, Greatest, Least

from identity.scoping import Action, TenantScopedQuerySet

if TYPE_CHECKING:
    from identity.identity import Identity

    # the type arguments below, written as strings: models.py imports this module
    from .models import (  # noqa: F401
        SSHCertificate,
        SSHSession,
        Workload,
        WorkloadAccess,
        WorkloadEvent,
    )

# every GPU a workload holds, in a query: `gpu_count` on each of its `nodes` (Workload.gpu_total)
GPU_TOTAL = F("gpu_count") * F("nodes")
CPU_TOTAL = F("cpu") * F("nodes")  # cores and memory are per node (per rank) too
MEMORY_TOTAL = F("memory_gb") * F("nodes")


def run_within(start: dt.datetime, end: dt.datetime) -> ExpressionWrapper[CombinedExpression]:
    """A workload's run (started_at .. finished_at, or `end` while it runs) inside
    [start, end], as a duration: what budgets count and billing charges. Negative for a run
    outside the span: filter the rows to those that overlap it."""
    at_start = Value(start, output_field=DateTimeField())
    at_end = Value(end, output_field=DateTimeField())
    return ExpressionWrapper(
        Least(Coalesce("finished_at", at_end), at_end) - Greatest("started_at", at_start),
        output_field=DurationField())


class WorkloadQuerySet(TenantScopedQuerySet["Workload"]):
    owner_field = "owner"  # members change their own, managers every one of the project

    def restrict(self, identity: Identity | None, action: Action | str = Action.VIEW) -> Self:
        """A deleted workload is nobody's to see or change."""
        return super().restrict(identity, action).filter(deleted_at__isnull=True)

    def with_relations(self) -> Self:
        """With what the pages and the API show of each (no query per workload in a list)."""
        return self.select_related("tenant", "owner", "template", "gpu_type",
                                   "tenant__service_access", "access__application"
                                   ).prefetch_related("mounts")


class WorkloadEventQuerySet(TenantScopedQuerySet["WorkloadEvent"]):
    tenant_field = "workload__tenant"


class WorkloadAccessQuerySet(TenantScopedQuerySet["WorkloadAccess"]):
    tenant_field = "workload__tenant"
    owner_field = "workload__owner"


class SSHCertificateQuerySet(TenantScopedQuerySet["SSHCertificate"]):
    tenant_field = "workload__tenant"
    owner_field = "user"


class SSHSessionQuerySet(TenantScopedQuerySet["SSHSession"]):
    tenant_field = "workload__tenant"
    owner_field = "user"
