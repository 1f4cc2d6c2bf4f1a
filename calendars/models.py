"""The cluster's calendar: GPU reservations and maintenance windows.

- Reservation: `count` GPUs of a type for a tenant (project) from `start` to `end`, once or
  every week until `until`. While an occurrence runs, the tenant's quota of that type is raised
  by `count` (a QuotaAdjustment of source "reservation"; with Kueue, its ClusterQueue's nominal
  quota).
- ReservationOccurrence: what happened to one occurrence (made when the calendar's beat first
  acts on it): borrowers warned, applied, its tenant's people warned of the end, released
  unused, ended, then the tenant's workloads beyond the quota left told and, after the end's
  grace, put back in line or stopped. Each step is a conditional update of its own column, so a
  retried or concurrent beat does each once.
- ReservationAllowance: what a tenant's managers may book themselves (admins book anything).
- MaintenanceWindow: nodes (names, a label selector, or every node of a GPU type) out of service
  from `start` to `end`; announced, then cordoned (and drained) at the start, uncordoned at the
  end, every step recorded here once and audited. It may carry a re-layout of its named nodes
  (their MIG config or time-slicing replicas), applied after the drain (relayout.py).
- CalendarVersion: one row whose token changes with every write the launch check's calendar
  depends on (cache.py holds that calendar in the process; triggers in the database change the
  token, migration 0004).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

from django.conf import settings
from django.db import models

from .querysets import MaintenanceWindowQuerySet, ReservationAllowanceQuerySet, ReservationQuerySet

WEEK = dt.timedelta(days=7)


class Reservation(models.Model):
    class Recurrence(models.TextChoices):
        NONE = "", "once"
        WEEKLY = "weekly", "every week"

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE,
                               related_name="reservations")
    gpu_type = models.ForeignKey("catalogue.GpuType", on_delete=models.PROTECT, related_name="+")
    count = models.PositiveIntegerField()
    start = models.DateTimeField()  # the first occurrence's
    end = models.DateTimeField()
    recurrence = models.CharField(max_length=8, choices=Recurrence.choices, blank=True,
                                  default=Recurrence.NONE)
    until = models.DateTimeField(null=True, blank=True,
                                 help_text="a weekly reservation's last occurrence starts "
                                           "before this (required for weekly ones)")
    note = models.CharField(max_length=500, blank=True, default="")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    # booked by one of the tenant's managers, within its allowance (an admin's booking is
    # not counted against it)
    against_allowance = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    cancelled_at = models.DateTimeField(null=True, blank=True)

    objects = ReservationQuerySet.as_manager()

    class Meta:
        ordering = ["start", "id"]
        indexes = [models.Index(fields=["gpu_type", "end"], name="reservation_type_end")]

    def __str__(self) -> str:
        return f"{self.count}× {self.gpu_type_id} for {self.tenant} from {self.start:%Y-%m-%d %H:%M}"

    @property
    def duration(self) -> dt.timedelta:
        return self.end - self.start

    @property
    def last_end(self) -> dt.datetime:
        """When its last occurrence ends."""
        if self.recurrence != self.Recurrence.WEEKLY or self.until is None:
            return self.end
        weeks = max((self.until - self.start) // WEEK, 0)
        last_start = self.start + WEEK * weeks
        if last_start >= self.until and weeks:
            last_start -= WEEK
        return last_start + self.duration

    def occurrences(self, since: dt.datetime, until: dt.datetime
                    ) -> Iterator[tuple[dt.datetime, dt.datetime]]:
        """Its (start, end) intervals that overlap [since, until), in order."""
        duration = self.duration
        if self.recurrence != self.Recurrence.WEEKLY:
            if self.start < until and self.end > since:
                yield self.start, self.end
            return
        first = 0
        if since > self.end:
            first = max((since - self.end) // WEEK, 0)
        index = first
        while True:
            start = self.start + WEEK * index
            if start >= until or (self.until is not None and start >= self.until):
                return
            if start + duration > since:
                yield start, start + duration
            index += 1


class ReservationOccurrence(models.Model):
    reservation = models.ForeignKey(Reservation, on_delete=models.CASCADE,
                                    related_name="occurrence_states")
    start = models.DateTimeField()
    end = models.DateTimeField()
    warned_at = models.DateTimeField(null=True, blank=True)  # borrowers told, an hour ahead
    applied_at = models.DateTimeField(null=True, blank=True)  # the quota raised
    released_at = models.DateTimeField(null=True, blank=True)  # unused after the grace
    ended_at = models.DateTimeField(null=True, blank=True)
    # the owners of workloads that would hold GPUs beyond the quota at its end told, an hour
    # ahead
    end_warned_at = models.DateTimeField(null=True, blank=True)
    # after it ended (or was cancelled): the workloads beyond the quota then in force, their
    # owners told (excess_workloads: their ids, newest first), and the deadline after which
    # those still beyond it are put back in line or stopped (excess_done_at: that step done)
    excess_told_at = models.DateTimeField(null=True, blank=True)
    excess_due_at = models.DateTimeField(null=True, blank=True)
    excess_workloads = models.JSONField(default=list, blank=True)
    excess_done_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["start"]
        constraints = [models.UniqueConstraint(fields=["reservation", "start"],
                                               name="one_state_per_occurrence")]

    def __str__(self) -> str:
        return f"{self.reservation} at {self.start:%Y-%m-%d %H:%M}"


class ReservationAllowance(models.Model):
    """What a tenant's managers may book themselves: at most `gpu_hours` GPU-hours in
    reservations not yet ended, none further ahead than `max_days_ahead`. No row: managers
    may not book (admins always may)."""

    tenant = models.OneToOneField("tenants.Tenant", on_delete=models.CASCADE,
                                  related_name="reservation_allowance")
    gpu_hours = models.PositiveIntegerField(default=0)
    max_days_ahead = models.PositiveIntegerField(default=90)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ReservationAllowanceQuerySet.as_manager()

    def __str__(self) -> str:
        return f"reservation allowance of {self.tenant}: {self.gpu_hours} GPU-hours"


class MaintenanceWindow(models.Model):
    class State(models.TextChoices):
        ANNOUNCED = "announced", "announced"
        ACTIVE = "active", "in progress"
        ENDED = "ended", "ended"
        CANCELLED = "cancelled", "cancelled"

    # what it covers: node names, or a label selector (matchLabels), or every node of a type
    nodes = models.JSONField(default=list, blank=True)
    node_selector = models.JSONField(default=dict, blank=True)
    gpu_type = models.ForeignKey("catalogue.GpuType", null=True, blank=True,
                                 on_delete=models.PROTECT, related_name="+")
    start = models.DateTimeField()
    end = models.DateTimeField()
    reason = models.CharField(max_length=500)
    drain = models.BooleanField(default=False)
    state = models.CharField(max_length=12, choices=State.choices, default=State.ANNOUNCED)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    cancelled_at = models.DateTimeField(null=True, blank=True)
    # the nodes it resolved to (at the announcement, again at the start): {name: GPUs}
    affected = models.JSONField(default=dict, blank=True)
    # progress, each set once (conditional updates): notices, cordon, drain, uncordon
    notified_24h_at = models.DateTimeField(null=True, blank=True)
    notified_1h_at = models.DateTimeField(null=True, blank=True)
    cordoned_at = models.DateTimeField(null=True, blank=True)
    cordoned = models.JSONField(default=list, blank=True)  # the nodes the portal cordoned
    drained_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    # a re-layout of its nodes (relayout.py): the layout to be per node ({name: {"mig_config":
    # "all-2g.20gb"} or {"replicas": 2}}), what it was to do when announced (each node's
    # change, capacity per GPU type before and after, the warnings), and how far each node is
    # ({name: {"state": "waiting"|"relabelled"|"applied"|"failed", "reason": …}})
    relayout = models.JSONField(default=dict, blank=True)
    relayout_plan = models.JSONField(default=dict, blank=True)
    relayout_state = models.JSONField(default=dict, blank=True)

    objects = MaintenanceWindowQuerySet.as_manager()

    class Meta:
        ordering = ["start", "id"]
        indexes = [models.Index(fields=["state", "end"], name="window_state_end")]

    def __str__(self) -> str:
        return f"maintenance #{self.pk} {self.start:%Y-%m-%d %H:%M}–{self.end:%H:%M}: {self.reason}"

    @property
    def target_text(self) -> str:
        """What it covers, in words."""
        if self.nodes:
            return ", ".join(self.nodes)
        if self.node_selector:
            return ",".join(f"{k}={v}" for k, v in sorted(self.node_selector.items()))
        return f"every {self.gpu_type.slug} node" if self.gpu_type is not None else "no node"


class CalendarVersion(models.Model):
    """The calendar's version: one row (id 1) whose `token` triggers in the database replace,
    in the writing transaction, at every write of what the launch check reads of the calendar
    (cache.py): a reservation, a maintenance window, an occurrence released (or a released one
    changed), a tenant's name, a GPU type. Nothing in Python writes it: whoever writes those
    rows (a service, the beat, a shell, a test's `.update()`) changes it. A token is random and
    never comes back, so what a transaction rolled back saw is never taken for a later state;
    no row (a flush emptied the table) reads as None until the next write."""

    token = models.CharField(max_length=32)

    def __str__(self) -> str:
        return f"calendar version {self.token}"
