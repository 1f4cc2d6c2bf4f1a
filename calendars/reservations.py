"""Reservations in effect: the calendar's beat raises a tenant's quota while its
reservations run, warns borrowers an hour ahead, and releases what goes unused; a launch on
borrowed GPUs is told before submit when a reservation starts within its maximum runtime.

Every minute (tasks.reservations_task) `reservations_tick` acts on each occurrence
of a live reservation that runs now or starts within the hour. Each step is a conditional update
of its own ReservationOccurrence column (the row made with get_or_create on (reservation,
start)), so a beat run twice, or two at once, does each step once:

- warned_at, an hour before its start: the owners of borrowing workloads of other tenants on
  the type that would still run at the start are told ("reservation" notifications).
- applied_at, at its start: it counts in its tenant's quota (a QuotaAdjustment of source
  "reservation", from its start to its end).
- released_at, once unused through the grace (PORTAL_RESERVATION_GRACE_MINUTES from when it
  was applied; `occurrence_unused` says what unused means): it stops counting, its GPUs are
  bookable again (selectors cut it there) and its booker is told.
- end_warned_at, an hour before its end: the owners of the tenant's workloads that would hold
  GPUs of the type beyond its quota at the end (`beyond_quota`) are told what happens then.
- ended_at: it no longer counts — its end passed, it was cancelled, or it was released.
- excess_told_at, at once after ended_at (the quota lowered in the same run): the tenant's
  workloads that hold GPUs of the type beyond the quota now in force (its own quota and its
  other reservations still running), the newest first and as many as it takes to get back
  within it, are recorded and their owners told, with the deadline (excess_due_at: the end's
  grace, PORTAL_RESERVATION_END_GRACE_MINUTES, later).
- excess_done_at, at the deadline: of those, the ones still needed to get back within the quota
  then in force (newest first) are put back in line (batch:
  workloads.services.workload_requeue) or stopped (workload_stop), audited. A tenant back within
  it by then (its workloads ended, another reservation began) loses nothing. Launches still
  waiting (on Kueue, queued) hold nothing and wait. Neither Kueue nor a ResourceQuota stops
  what was admitted when a quota goes down: without this the GPUs of an ended (or cancelled)
  reservation stayed the tenant's for as long as its workloads ran.

Then each tenant's reservation adjustments are set to its occurrences running now (not
cancelled, not released; one row each, in force from its start to its end) through
tenants.services.quota_adjustments_set, which changes and audits only what differs and
reconciles the tenant's ResourceQuota or, on Kueue, its ClusterQueue's nominal quota. A row
whose end passed counts no more even before the beat removes it: a stalled beat lifts no
quota for good. Where the cluster queues on Kueue, the raised nominal quota is
what takes borrowed GPUs back: Kueue preempts borrowers (reclaimWithinCohort) as soon as the
tenant's workloads need them, and the tracker tells their owners (workloads/notices.py).
Kueue reclaims within the cohort's nominal quotas, not the nodes: where the tenants' quotas and
the reservations running together exceed the cluster's GPUs of a type, a reserving tenant's
workload can be admitted by Kueue and wait for the scheduler instead of reclaiming.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections import defaultdict

from django.conf import settings
from django.db import transaction
from django.db.models import Q, Sum
from django.utils import timezone

from audit.services import audit_record
from catalogue.models import GpuType, Template
from catalogue.selectors import AHEAD as OUTLOOK_AHEAD
from identity.assignments import project_role_now
from identity.client import KeystoneError
from identity.models import User
from identity.roles import PortalRole
from kube.kueue import queueing_shown
from notifications.models import Kind
from notifications.services import notify
from tenants.figures import AdjustmentLine
from tenants.models import Quota, QuotaAdjustment, Tenant
from tenants.selectors import quota_figures, tenants_adjusted_by, tenants_with_quota_figures
from tenants.services import quota_adjustments_set
from workloads.hooks import LaunchContext, Note
from workloads.journal import notify_owner
from workloads.models import Workload
from workloads.querysets import GPU_TOTAL
from workloads.services import workload_requeue, workload_stop

from .cache import shared_calendar, shared_occurrences
from .models import Reservation, ReservationOccurrence
from .selectors import HORIZON, Occurrence, occurrences_between
from .timeline import Interval, crosses, segments

log = logging.getLogger(__name__)

WARN_AHEAD = dt.timedelta(hours=1)
S = Workload.State
HOLDING = (S.PENDING, S.RUNNING)  # admitted: they hold their GPUs
WAITING = (S.SUBMITTED, S.CREATING, S.QUEUED)  # launched, not (yet, or again) holding GPUs


def _when(at: dt.datetime) -> str:
    return f"{timezone.localtime(at, dt.UTC):%Y-%m-%d %H:%M} UTC"


def reservation_text(reservation: Reservation) -> str:
    """"vision-lab's reservation of 4 a100"."""
    return (f"{reservation.tenant.name}'s reservation of {reservation.count} "
            f"{reservation.gpu_type.slug}")


@dataclasses.dataclass
class TickResult:
    """What one tick did, by occurrence (reservation id, start)."""

    warned: list[tuple[int, dt.datetime]] = dataclasses.field(default_factory=list)
    applied: list[tuple[int, dt.datetime]] = dataclasses.field(default_factory=list)
    released: list[tuple[int, dt.datetime]] = dataclasses.field(default_factory=list)
    ended: list[tuple[int, dt.datetime]] = dataclasses.field(default_factory=list)
    quotas: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)  # changed
    end_warned: list[tuple[int, dt.datetime]] = dataclasses.field(default_factory=list)
    # after the end: the workloads beyond the quota told, and at the deadline those put back
    # in line and those stopped
    excess_told: dict[tuple[int, dt.datetime], list[int]] = \
        dataclasses.field(default_factory=dict)
    requeued: list[int] = dataclasses.field(default_factory=list)
    stopped: list[int] = dataclasses.field(default_factory=list)

    @property
    def acted(self) -> bool:
        return bool(self.warned or self.applied or self.released or self.ended or self.quotas
                    or self.end_warned or self.excess_told or self.requeued or self.stopped)


def _row(occurrence: Occurrence) -> ReservationOccurrence:
    row, _ = ReservationOccurrence.objects.get_or_create(
        reservation=occurrence.reservation, start=occurrence.start,
        defaults={"end": occurrence.end})
    return row


def _claim(row: ReservationOccurrence, column: str, now: dt.datetime) -> bool:
    """Set `column` to now unless it is set already; True for the one caller that set it."""
    done = ReservationOccurrence.objects.filter(pk=row.pk, **{f"{column}__isnull": True}) \
        .update(**{column: now})
    if done:
        setattr(row, column, now)
    return bool(done)


# --- borrowers: who runs on GPUs another tenant's reservation takes back ----------------------

def borrowing_tenants(gpu_type: GpuType, *, exclude: int | None = None) -> dict[int, int]:
    """{tenant id: GPUs of the type it holds beyond its own quota in effect} for the tenants
    that hold more of the type than their quota (with their own reservations): what Kueue lent
    them from others' idle quota."""
    holding = Workload.objects.filter(state__in=HOLDING, gpu_type=gpu_type,
                                      deleted_at__isnull=True)
    if exclude is not None:
        holding = holding.exclude(tenant_id=exclude)
    held: dict[int, int] = dict(holding.order_by().values_list("tenant_id")
                                .annotate(n=Sum(GPU_TOTAL)))
    borrowing = {}
    for tenant in tenants_with_quota_figures(Tenant.objects.filter(pk__in=held,
                                                                   quota__isnull=False)):
        own = quota_figures(tenant).gpus(gpu_type.slug)
        if held[tenant.pk] > own:
            borrowing[tenant.pk] = held[tenant.pk] - own
    return borrowing


def borrowers_warn(occurrence: Occurrence, now: dt.datetime) -> int:
    """Tell the owners of the borrowing tenants' workloads on the type that would still run at
    the occurrence's start (their maximum runtime ends after it, or they have none). Returns how
    many were told (once per workload and occurrence: the notification's key)."""
    reservation = occurrence.reservation
    borrowing = borrowing_tenants(reservation.gpu_type, exclude=reservation.tenant_id)
    if not borrowing:
        return 0
    window = Interval(occurrence.start, occurrence.end, reservation.count)
    told = 0
    workloads = (Workload.objects.filter(state__in=HOLDING, gpu_type=reservation.gpu_type,
                                         tenant_id__in=borrowing, deleted_at__isnull=True)
                 .select_related("owner", "tenant", "gpu_type").order_by("pk"))
    for workload in workloads:
        if workload.expires_at is not None:
            if workload.expires_at <= occurrence.start:
                continue
        elif not crosses(workload.started_at or now,
                         workload.max_runtime_minutes * 60 if workload.max_runtime_minutes
                         else None, window):
            continue
        text = (f"{reservation_text(reservation)} starts at {_when(occurrence.start)}; "
                f"#{workload.pk} runs on borrowed GPUs and may be reclaimed then.")
        told += notify_owner(workload, kind=Kind.RESERVATION,
                             title=f"{workload.name} (#{workload.pk}) may be reclaimed at "
                                   f"{_when(occurrence.start)}",
                             text=text, key=f"reservation-warn:{reservation.pk}:"
                                           f"{int(occurrence.start.timestamp())}:{workload.pk}")
    return told


# --- unused: the grace release -----------------------------------------------------------------

def occurrence_unused(occurrence: Occurrence, *, since: dt.datetime, now: dt.datetime,
                      reserved_besides: int) -> bool:
    """Whether a running occurrence went unused from `since` (when it was applied) until now.

    Unused means both:
    - at no instant since then did the tenant hold more GPUs of the type than it may without
      this occurrence — its own quota of the type plus `reserved_besides` (what its other
      occurrences of the type running now add). "Holding": a workload of the type from its
      start (started_at) to its finish, and an admitted one (pending, running) now;
    - nothing of the type waits now: no launch of it submitted, being created or queued (on
      Kueue, the tenant's queue would want the GPUs).
    Within its own quota the tenant never needed the reservation; once used beyond it, an
    occurrence is kept to its end (a gap between two jobs does not lose it)."""
    reservation = occurrence.reservation
    workloads = Workload.objects.filter(tenant_id=reservation.tenant_id,
                                        gpu_type_id=reservation.gpu_type_id)
    if workloads.filter(state__in=WAITING, deleted_at__isnull=True).exists():
        return False
    quota = Quota.objects.get(tenant_id=reservation.tenant_id)
    allowed = quota.gpus_by_type().get(reservation.gpu_type.slug, 0) + reserved_besides
    until = now + dt.timedelta(seconds=1)  # what holds GPUs now counts
    held = []
    for workload in workloads.filter(Q(finished_at__isnull=True) | Q(finished_at__gt=since)) \
            .filter(Q(started_at__lt=until) | Q(state__in=HOLDING)):
        begin = workload.started_at or now
        end = workload.finished_at or (until if workload.state in Workload.ACTIVE_STATES
                                       else begin)
        if end > max(begin, since):
            held.append(Interval(max(begin, since), end, workload.gpu_total))
    peak = max((seg.booked for seg in segments(since, until, held)), default=0)
    return peak <= allowed


def _managers(tenant: Tenant) -> list[User]:
    """The tenant's managers the portal can find: the users who last worked in its project
    and whom Keystone names its managers now (none when Keystone cannot be asked)."""
    found: list[User] = []
    for user in User.objects.filter(last_project_id=tenant.keystone_project_id,
                                    keystone_user_id__isnull=False):
        try:
            role = project_role_now(user.keystone_user_id or "", tenant.keystone_project_id)
        except KeystoneError as exc:
            log.warning("the managers of %s cannot be asked of Keystone: %s", tenant.name, exc)
            return found
        if role is not None and role >= PortalRole.MANAGER:
            found.append(user)
    return found


def release_recipients(reservation: Reservation) -> list[User]:
    """Who hears of an occurrence released unused: its booker, else the tenant's managers (asked
    of Keystone: never within the release's transaction, see reservations_tick)."""
    if reservation.created_by is not None:
        return [reservation.created_by]
    return _managers(reservation.tenant)


def booker_release_notify(occurrence: Occurrence, *, users: list[User], at: dt.datetime) -> int:
    """Tell `users` (release_recipients) that an occurrence was released unused."""
    reservation = occurrence.reservation
    grace = settings.PORTAL_RESERVATION_GRACE_MINUTES
    text = (f"{reservation_text(reservation)} from {_when(occurrence.start)} to "
            f"{_when(occurrence.end)} was released at {_when(at)}: nothing used its GPUs in "
            f"the first {grace} minutes (the project held no more {reservation.gpu_type.slug} "
            "GPUs than its own quota and had none waiting). They are back in the pool and can "
            "be booked again.")
    return notify(kind=Kind.RESERVATION, users=users, tenant=reservation.tenant,
                  title=f"Reservation #{reservation.pk} released unused", text=text,
                  key=f"reservation-released:{reservation.pk}:"
                      f"{int(occurrence.start.timestamp())}")


# --- the end: workloads beyond the quota that goes back down ----------------------------------

def end_rule_text() -> str:
    """What an occurrence's end (or a cancellation) does to the workloads it let run, in words
    (the booking page, the API's reservations, gpuctl)."""
    minutes = settings.PORTAL_RESERVATION_END_GRACE_MINUTES
    return (f"When an occurrence ends, or the reservation is cancelled, the project's quota goes "
            f"back down at once. The owners of its workloads that then hold GPUs of the type "
            f"beyond it (the newest first, as many as it takes) are told, and {minutes} minutes "
            f"later those still beyond it are put back in line (batch jobs) or stopped "
            f"(services).")


def _holding(tenant_id: int, gpu_type_id: int) -> list[Workload]:
    """The tenant's admitted workloads of the type (they hold their GPUs), newest first."""
    return list(Workload.objects.filter(tenant_id=tenant_id, gpu_type_id=gpu_type_id,
                                        state__in=HOLDING, deleted_at__isnull=True)
                .select_related("owner", "tenant", "gpu_type").order_by("-created_at", "-pk"))


def beyond_quota(holding: list[Workload], allowed: int, *,
                 among: set[int] | None = None) -> list[Workload]:
    """Of `holding` (newest first), the newest that hold GPUs beyond `allowed`: as many as it
    takes for the rest to fit within it (only those of `among`, when given)."""
    excess = sum(w.gpu_total for w in holding) - allowed
    chosen = []
    for workload in holding:
        if excess <= 0:
            break
        if among is not None and workload.pk not in among:
            continue
        chosen.append(workload)
        excess -= workload.gpu_total
    return chosen


def _quota_now(tenant_id: int, slug: str) -> int | None:
    """The tenant's quota of the type in force now (its own and its running reservations'),
    None: it has no quota (gone)."""
    tenant = Tenant.objects.select_related("quota").filter(pk=tenant_id,
                                                           quota__isnull=False).first()
    return quota_figures(tenant).gpus(slug) if tenant is not None else None


def _quota_at(reservation: Reservation, at: dt.datetime) -> int | None:
    """The tenant's quota of the reservation's type at `at`: its own, and what its
    reservations of the type running then add (an occurrence ending at `at` does not)."""
    quota = Quota.objects.filter(tenant_id=reservation.tenant_id).first()
    if quota is None:
        return None
    gpu_type = reservation.gpu_type
    besides = sum(o.reservation.count for o in
                  occurrences_between(gpu_type, at, at + dt.timedelta(seconds=1))
                  if o.reservation.tenant_id == reservation.tenant_id and not o.released)
    return quota.gpus_by_type().get(gpu_type.slug, 0) + besides


def _fate(workload: Workload) -> str:
    return ("put back in line (its run stopped and submitted again, to wait its turn)"
            if workload.kind == Template.Kind.BATCH else "stopped")


def end_warn(occurrence: Occurrence) -> int:
    """An hour before an occurrence's end: tell the owners of the tenant's workloads that would
    still hold GPUs of the type beyond its quota then (newest first) what happens at the end.
    Returns how many were told (once per workload and occurrence: the notification's key)."""
    reservation = occurrence.reservation
    allowed = _quota_at(reservation, occurrence.end)
    if allowed is None:
        return 0
    grace = settings.PORTAL_RESERVATION_END_GRACE_MINUTES
    slug, tenant = reservation.gpu_type.slug, reservation.tenant
    still = [w for w in _holding(reservation.tenant_id, reservation.gpu_type_id)
             if w.expires_at is None or w.expires_at > occurrence.end]
    told = 0
    for workload in beyond_quota(still, allowed):
        text = (f"{reservation_text(reservation)} ends at {_when(occurrence.end)}; then "
                f"{tenant.name} may hold {allowed} {slug} GPUs again, and #{workload.pk} is "
                f"among its newest beyond that. If the project still holds more then, it is "
                f"{_fate(workload)} {grace} minutes after the end. Stop it, or free "
                f"{slug} GPUs, before then to keep it from happening.")
        told += notify_owner(workload, kind=Kind.RESERVATION,
                             title=f"{workload.name} (#{workload.pk}) runs on a reservation "
                                   f"that ends at {_when(occurrence.end)}",
                             text=text,
                             key=f"reservation-ends:{reservation.pk}:"
                                 f"{int(occurrence.start.timestamp())}:{workload.pk}")
    return told


def _ending(row: ReservationOccurrence) -> str:
    """"ended at …" or "was cancelled at …" (a cancellation while it ran)."""
    cancelled = row.reservation.cancelled_at
    if cancelled is not None and cancelled < row.end:
        return f"was cancelled at {_when(cancelled)}"
    if row.released_at is not None:
        return f"was released at {_when(row.released_at)}"
    return f"ended at {_when(row.end)}"


def excess_tell(row: ReservationOccurrence, now: dt.datetime) -> list[int]:
    """Just after an occurrence stopped counting (the quota lowered in the same run): record
    the tenant's workloads beyond the quota now in force (newest first, as many as it takes)
    and the deadline, and tell their owners. In the caller's transaction, after its claim of
    excess_told_at. Returns the workloads' ids."""
    reservation = row.reservation
    slug, tenant = reservation.gpu_type.slug, reservation.tenant
    allowed = _quota_now(reservation.tenant_id, slug)
    holding = _holding(reservation.tenant_id, reservation.gpu_type_id)
    chosen = beyond_quota(holding, allowed) if allowed is not None else []
    due = now + dt.timedelta(minutes=settings.PORTAL_RESERVATION_END_GRACE_MINUTES)
    ReservationOccurrence.objects.filter(pk=row.pk).update(
        excess_due_at=due, excess_workloads=[w.pk for w in chosen],
        excess_done_at=None if chosen else now)
    held = sum(w.gpu_total for w in holding)
    for workload in chosen:
        then = "put back in line" if workload.kind == Template.Kind.BATCH else "stopped"
        text = (f"{reservation_text(reservation)} {_ending(row)}: {tenant.name} may hold "
                f"{allowed} {slug} GPUs again and holds {held}. #{workload.pk} is among its "
                f"newest beyond that: at {_when(due)} it is {_fate(workload)}, unless the "
                f"project is back within its quota by then. Stop it, or free {slug} GPUs, "
                f"to keep it from happening.")
        notify_owner(workload, kind=Kind.RESERVATION,
                     title=f"{workload.name} (#{workload.pk}) is beyond {tenant.name}'s quota: "
                           f"{then} at {_when(due)}",
                     text=text,
                     key=f"reservation-excess:{reservation.pk}:"
                         f"{int(row.start.timestamp())}:{workload.pk}")
    if chosen:
        log.info("reservation #%s %s: %s beyond %s's quota, due at %s", reservation.pk,
                 _ending(row), [w.pk for w in chosen], tenant.name, due)
    return [w.pk for w in chosen]


def excess_settle(row: ReservationOccurrence) -> tuple[list[int], list[int]]:
    """At the deadline: of the workloads told, those still needed to get the tenant back within
    its quota now in force (newest first) are put back in line (batch) or stopped (services)
    through the workloads' own paths (each audited; the owner told), and the step audited. In
    the caller's transaction, after its claim of excess_done_at. Returns (requeued, stopped)."""
    reservation = row.reservation
    slug, tenant = reservation.gpu_type.slug, reservation.tenant
    allowed = _quota_now(reservation.tenant_id, slug)
    if allowed is None:
        return [], []
    holding = _holding(reservation.tenant_id, reservation.gpu_type_id)
    held = sum(w.gpu_total for w in holding)
    chosen = beyond_quota(holding, allowed, among=set(row.excess_workloads or ()))
    requeued, stopped = [], []
    for workload in chosen:
        reason = (f"{reservation_text(reservation)} {_ending(row)}, and {tenant.name} still held "
                  f"{held} {slug} GPUs, beyond its quota of {allowed}, "
                  f"{settings.PORTAL_RESERVATION_END_GRACE_MINUTES} minutes later.")
        if workload.kind == Template.Kind.BATCH:
            if workload_requeue(workload=workload, reason=reason) is not None:
                requeued.append(workload.pk)
        else:
            workload_stop(workload=workload, user=None,
                          reason=f"{reason} Launch it again once the project has {slug} GPUs "
                                 "free.")
            stopped.append(workload.pk)
    if requeued or stopped:
        audit_record(actor=None, action="reservation.end_enforce", tenant=tenant,
                     target=f"reservation #{reservation.pk}",
                     before={"occurrence": row.start.isoformat(), "held": held,
                             "quota": allowed, "told": row.excess_workloads},
                     after={"requeued": requeued, "stopped": stopped})
        log.info("reservation #%s: %s beyond %s's quota put back in line, %s stopped",
                 reservation.pk, requeued, tenant.name, stopped)
    return requeued, stopped


# --- the beat ----------------------------------------------------------------------------------

def reservations_tick(now: dt.datetime | None = None) -> TickResult:
    """One pass of the calendar's reservations beat (idempotent; see the module's text)."""
    now = now or timezone.now()
    result = TickResult()
    grace = dt.timedelta(minutes=settings.PORTAL_RESERVATION_GRACE_MINUTES)
    running: list[tuple[Occurrence, ReservationOccurrence]] = []
    for gpu_type in GpuType.objects.filter(
            pk__in=Reservation.objects.live().values("gpu_type")).order_by("slug"):
        for occurrence in occurrences_between(gpu_type, now, now + WARN_AHEAD):
            key = (occurrence.reservation.pk, occurrence.start)
            if occurrence.start > now:
                with transaction.atomic():
                    if _claim(_row(occurrence), "warned_at", now):
                        borrowers_warn(occurrence, now)
                        result.warned.append(key)
                continue
            row = _row(occurrence)
            if row.applied_at is None and _claim(row, "applied_at", now):
                result.applied.append(key)
            running.append((occurrence, row))
            if not occurrence.released and row.end_warned_at is None and \
                    occurrence.end - WARN_AHEAD <= now:
                with transaction.atomic():
                    if _claim(row, "end_warned_at", now):
                        end_warn(occurrence)
                        result.end_warned.append(key)
    # the grace: judged from when each was applied, with the others of its tenant and type
    for occurrence, row in list(running):
        if row.released_at is not None or row.applied_at is None or \
                now < row.applied_at + grace:
            continue
        reservation = occurrence.reservation
        besides = sum(o.reservation.count for o, r in running if r.pk != row.pk
                      and o.reservation.tenant_id == reservation.tenant_id
                      and o.reservation.gpu_type_id == reservation.gpu_type_id)
        if not occurrence_unused(occurrence, since=row.applied_at, now=now,
                                 reserved_besides=besides):
            continue
        # asked before the transaction: the claim below changes the calendar's version (a
        # trigger), whose row stays locked until the commit, and every other writer of the
        # calendar (a booking, a cancellation, the beat in another process) waits on it; no
        # call to Keystone may hold them up
        users = release_recipients(reservation)
        with transaction.atomic():
            if _claim(row, "released_at", now):
                booker_release_notify(occurrence, users=users, at=now)
                result.released.append((reservation.pk, occurrence.start))
        running.remove((occurrence, row))
    # what no longer counts: ended, cancelled or released
    counting = {row.pk for _, row in running}
    for row in (ReservationOccurrence.objects.filter(applied_at__isnull=False,
                                                     ended_at__isnull=True)
                .exclude(pk__in=counting)):
        if _claim(row, "ended_at", now):
            result.ended.append((row.reservation_id, row.start))
    result.quotas = _quotas_set(running)
    _excess(result, now)
    return result


def _excess(result: TickResult, now: dt.datetime) -> None:
    """The end's two steps, on the quota just set: the owners of the workloads beyond it told
    (each occurrence that stopped counting, once: also one whose run was killed before it
    told), then, past each deadline, those still beyond it put back in line or stopped. Each
    step's claim and its work commit together: a killed run leaves it to the next."""
    rows = ReservationOccurrence.objects.select_related("reservation__tenant",
                                                        "reservation__gpu_type")
    for row in rows.filter(ended_at__isnull=False, excess_told_at__isnull=True):
        with transaction.atomic():
            if _claim(row, "excess_told_at", now):
                told = excess_tell(row, now)
                if told:
                    result.excess_told[(row.reservation_id, row.start)] = told
    for row in rows.filter(excess_due_at__lte=now, excess_done_at__isnull=True):
        with transaction.atomic():
            if _claim(row, "excess_done_at", now):
                requeued, stopped = excess_settle(row)
                result.requeued += requeued
                result.stopped += stopped


def _quotas_set(running: list[tuple[Occurrence, ReservationOccurrence]]
                ) -> dict[str, dict[str, int]]:
    """Each tenant's reservation adjustments: one per occurrence running now, from its start to
    its end. Tenants with rows and none running now go back to none. Returns {tenant name:
    {GPU type slug: GPUs reserved}} of the tenants whose rows changed."""
    wanted: dict[int, list[AdjustmentLine]] = defaultdict(list)
    names: dict[int, list[str]] = defaultdict(list)
    for occurrence, row in running:
        reservation = occurrence.reservation
        text = f"#{reservation.pk} ({reservation.count} {reservation.gpu_type.slug})"
        wanted[reservation.tenant_id].append(AdjustmentLine(
            source=QuotaAdjustment.Source.RESERVATION, gpu_type=reservation.gpu_type.slug,
            gpus=reservation.count, ref=f"occurrence:{row.pk}",
            reason=f"reservation {text}", starts_at=occurrence.start, ends_at=occurrence.end))
        names[reservation.tenant_id].append(text)
    adjusted = set(tenants_adjusted_by(QuotaAdjustment.Source.RESERVATION)
                   .values_list("pk", flat=True))
    changed: dict[str, dict[str, int]] = {}
    for tenant in Tenant.objects.filter(pk__in=set(wanted) | adjusted).order_by("pk"):
        lines = wanted.get(tenant.pk, [])
        reason = (f"reservations running: {', '.join(names[tenant.pk])}" if names[tenant.pk]
                  else "no reservation running")
        if quota_adjustments_set(tenant=tenant, source=QuotaAdjustment.Source.RESERVATION,
                                 adjustments=lines, reason=reason):
            reserved: dict[str, int] = defaultdict(int)
            for line in lines:
                reserved[line.gpu_type or ""] += line.gpus
            changed[tenant.name] = dict(reserved)
    return changed


# --- before a launch ---------------------------------------------------------------------------

def reservation_launch_advice(launch: LaunchContext) -> list[Note]:
    """A launch beyond the tenant's own quota of the type (where the cluster queues on Kueue:
    it borrows others' idle GPUs) whose maximum runtime (or no limit) runs into the start of
    another tenant's reservation of the type: it may be reclaimed then (a warning)."""
    if queueing_shown() is False:
        return []  # without Kueue, nothing beyond the quota is admitted: nothing is borrowed
    tenant, gpu_type, minutes = launch.tenant, launch.gpu_type, launch.max_runtime_minutes
    own = launch.figures.gpus(gpu_type.slug)
    if launch.reads.held_of(gpu_type.slug, HOLDING) + launch.gpus <= own:
        return []
    now = launch.now
    reach = now + (dt.timedelta(minutes=minutes) if minutes else HORIZON)
    # the first to start is the one to tell of: if it does not cross, no later one does
    occurrence = _first_of_others(launch, reach)
    if occurrence is None:
        return []
    reservation = occurrence.reservation
    if not crosses(now, minutes * 60 if minutes else None,
                   Interval(occurrence.start, occurrence.end, reservation.count)):
        return []
    runtime = (f"within its maximum runtime ({minutes} min)" if minutes
               else "and it has no maximum runtime")
    return [("warning",
             f"Beyond {tenant.name}'s quota of {own} {gpu_type.slug} GPUs this launch "
             f"runs on borrowed GPUs; {reservation_text(reservation)} starts at "
             f"{_when(occurrence.start)}, {runtime}: it may be reclaimed then.")]


def _first_of_others(launch: LaunchContext, reach: dt.datetime) -> Occurrence | None:
    """The occurrence of another tenant's reservation of the type that starts first after
    now, before `reach`: among those of the next hours, which the check reads anyway (the
    capacity outlook's), else the first from then on (from the held calendar)."""
    now, soon = launch.now, launch.now + OUTLOOK_AHEAD
    first = next((o for o in shared_occurrences(launch.shared, launch.gpu_type, now, soon)
                  if now < o.start < reach and o.reservation.tenant_id != launch.tenant.pk),
                 None)
    if first is not None or reach <= soon:
        return first
    # none starts before `soon`: the first to start at `soon` or later
    return shared_calendar(launch.shared, now).next_occurrence(
        launch.gpu_type, soon - dt.timedelta(microseconds=1), reach,
        other_than_tenant=launch.tenant.pk)
