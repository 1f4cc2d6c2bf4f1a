"""The calendar's querysets: `restrict(identity, action)` (identity/scoping.py).

A reservation belongs to its tenant: its people see it, its managers cancel it (creating one is
the services' rule: admins, or managers within the allowance). Maintenance windows belong to the
cluster: everyone signed in sees them (they may be affected), admins alone write them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import models

from identity.scoping import Action, TenantScopedQuerySet

if TYPE_CHECKING:
    from .models import MaintenanceWindow, Reservation, ReservationAllowance  # noqa: F401


class ReservationQuerySet(TenantScopedQuerySet["Reservation"]):
    """View: the tenant's readers and up; change (cancel): its managers and admins."""

    def live(self) -> ReservationQuerySet:
        return self.filter(cancelled_at__isnull=True)


class ReservationAllowanceQuerySet(TenantScopedQuerySet["ReservationAllowance"]):
    admin_only = frozenset({Action.CHANGE})


class MaintenanceWindowQuerySet(models.QuerySet["MaintenanceWindow"]):
    def live(self) -> MaintenanceWindowQuerySet:
        return self.filter(cancelled_at__isnull=True)
