"""Idle culling: a running workload whose GPUs all stay under its tenant's threshold for the
tenant's idle minutes is warned; with the action "stop", it is stopped after the grace.

The tenant's settings are on its Quota: `idle_threshold_percent`, `idle_minutes`,
`idle_action` (warn | stop) and `idle_grace_minutes`. Services, notebooks and batch jobs are
treated alike.

When a workload is idle, judged from the raw samples (GpuSample) of its idle window
[now − idle_minutes, now]:
- every sample of every one of its GPUs is under the threshold (one busy moment of one GPU
  is enough to be "in use"), and
- the samples cover the window: the workload ran (and was not extended) before the window
  began, its first sample is within COVER_SLACK of the window's start and its last within
  COVER_SLACK of now. A gap in telemetry (exporter down, a scrape failing) never makes a
  workload idle: no samples, no judgement.

A workload whose samples carry no utilisation (a MIG instance under the NVML agent, which has
none per instance: memory only) is never judged idle. Its memory says nothing of whether it
computes: a notebook that loaded a model holds memory while it idles, and one whose user is
still typing holds none while it is about to run; stopping on memory alone would stop busy
work, so it is left to the runtime limit (the workload page's chart says so).

The cycle (`idle_check`, every PORTAL_IDLE_CHECK_SECONDS by beat), per running workload:
- exempt (an admin's `cull_exempt`): nothing, and a warning in force is withdrawn;
- warned, and a sample since the warning is at or over the threshold: the warning is
  withdrawn (it is in use again);
- warned, action "stop", `stop_at` passed and the window still idle (fresh samples, all
  under the threshold): stopped through `workload_stop`
  (the record, events and usage stay), audited `workload.idle_stop`;
- not warned and idle: warned — a Warning event, the banner on the workload page (with
  "I still need it"), a notification to the owner (notifications.notify: in the portal, by
  e-mail and webhooks as they chose), audited `workload.idle_warn`.

"I still need it" (`workload_idle_extend`) withdraws the warning and starts the idle window
again from that moment: the workload can be warned again only after a whole new idle
period, so the button extends it once per idle period.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging

from django.conf import settings
from django.db import transaction
from django.db.models import Avg, Count, Max, Min, QuerySet
from django.utils import timezone

from audit.services import audit_record
from identity.models import User
from tenants.models import Quota
from workloads.journal import notify_owner, workload_event
from workloads.models import Workload
from workloads.services import workload_stop

from .models import GpuSample, WorkloadIdle

log = logging.getLogger(__name__)


def cover_slack() -> dt.timedelta:
    """How far the first and last samples may lie inside the window's ends: 2.5 scrape
    intervals (one missed scrape is not a gap), at least 30 s."""
    return dt.timedelta(seconds=max(2.5 * float(settings.PORTAL_USAGE_SCRAPE_INTERVAL), 30.0))


# --- reads -----------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class IdleWindow:
    """A workload's GPU utilisation over its tenant's idle window, ending at `until`."""

    since: dt.datetime
    until: dt.datetime
    threshold: float
    samples: int
    util_max: float | None  # None: no sample with a utilisation (memory only: never idle)
    util_avg: float | None
    covered: bool  # the samples span the whole window (see the module's docstring)

    @property
    def judged(self) -> bool:
        """Whether the window's samples say how much the GPUs computed (memory only: not)."""
        return self.util_max is not None

    @property
    def idle(self) -> bool:
        return self.covered and self.util_max is not None and self.util_max < self.threshold


def idle_state_of(workload: Workload) -> WorkloadIdle | None:
    try:
        return workload.idle
    except WorkloadIdle.DoesNotExist:
        return None


def idle_window(workload: Workload, quota: Quota, *, now: dt.datetime) -> IdleWindow:
    """The workload's samples over [now − idle_minutes, now], in one aggregate query."""
    since = now - dt.timedelta(minutes=quota.idle_minutes)
    stats = GpuSample.objects.filter(workload_id=workload.pk, at__gte=since,
                                     at__lte=now).aggregate(
        n=Count("id"), peak=Max("util"), mean=Avg("util"), first=Min("at"), last=Max("at"))
    state = idle_state_of(workload)
    extended_at = state.extended_at if state is not None else None
    slack = cover_slack()
    covered = bool(
        stats["n"]
        and workload.started_at is not None and workload.started_at <= since
        and (extended_at is None or extended_at <= since)
        and stats["first"] <= since + slack and stats["last"] >= now - slack)
    return IdleWindow(since=since, until=now, threshold=float(quota.idle_threshold_percent),
                      samples=stats["n"] or 0, util_max=stats["peak"], util_avg=stats["mean"],
                      covered=covered)


def running_workloads() -> QuerySet[Workload]:
    """Workloads holding GPUs, with what the cycle needs (tenant's quota, owner, idle state)."""
    return (Workload.objects.filter(state=Workload.State.RUNNING, started_at__isnull=False)
            .select_related("tenant__quota", "owner", "gpu_type", "idle")
            .order_by("pk"))


@dataclasses.dataclass
class IdleRow:
    """An allocated-but-idle workload, as the admin dashboard lists it."""

    workload: Workload
    window: IdleWindow
    idle_minutes: int
    state: WorkloadIdle | None

    @property
    def exempt(self) -> bool:
        return bool(self.state and self.state.cull_exempt)

    @property
    def warned_at(self) -> dt.datetime | None:
        return self.state.warned_at if self.state else None

    @property
    def stop_at(self) -> dt.datetime | None:
        return self.state.stop_at if self.state else None


def idle_workloads(*, now: dt.datetime | None = None) -> list[IdleRow]:
    """Running workloads idle over their tenant's idle window right now (exempt ones too,
    marked), for the admin dashboard."""
    now = now or timezone.now()
    rows = []
    for workload in running_workloads():
        quota = getattr(workload.tenant, "quota", None)
        if quota is None:
            continue
        window = idle_window(workload, quota, now=now)
        if window.idle:
            rows.append(IdleRow(workload=workload, window=window,
                                idle_minutes=quota.idle_minutes,
                                state=idle_state_of(workload)))
    return rows


# --- writes ----------------------------------------------------------------------------------

def _locked_state(workload: Workload) -> WorkloadIdle:
    WorkloadIdle.objects.get_or_create(workload=workload)
    return WorkloadIdle.objects.select_for_update().get(workload=workload)


def _warning_text(workload: Workload, quota: Quota, window: IdleWindow,
                  stop_at: dt.datetime | None) -> str:
    peak = f"{window.util_max:.1f}" if window.util_max is not None else "0"
    gpus = workload.gpu_total
    text = (f"Its {gpus} GPU{'s' if gpus != 1 else ''} stayed under "
            f"{quota.idle_threshold_percent}% utilisation for {quota.idle_minutes} minutes "
            f"(at most {peak}%).")
    if stop_at is not None:
        text += (f" It will be stopped at {stop_at:%Y-%m-%d %H:%M %Z} unless it is used or "
                 "someone answers \"I still need it\" on its page.")
    else:
        text += " Please stop it if it is no longer needed, so that others can use the GPUs."
    return text


def workload_idle_warn(*, workload: Workload, quota: Quota, window: IdleWindow,
                       now: dt.datetime) -> WorkloadIdle:
    """Warn an idle workload: event, banner (the state's warned_at), notification, audit."""
    with transaction.atomic():
        state = _locked_state(workload)
        if state.warned_at is not None or state.cull_exempt:
            return state
        stop_at = None
        if quota.idle_action == Quota.IdleAction.STOP:
            stop_at = now + dt.timedelta(minutes=quota.idle_grace_minutes)
        state.warned_at, state.stop_at = now, stop_at
        state.warned_util_max = window.util_max
        state.warnings += 1
        state.save(update_fields=["warned_at", "stop_at", "warned_util_max", "warnings",
                                  "updated_at"])
        text = _warning_text(workload, quota, window, stop_at)
        workload_event(workload=workload, reason="IdleWarning", message=text, type="Warning")
        audit_record(actor=None, action="workload.idle_warn", tenant=workload.tenant,
                     target=workload.object_name,
                     after={"id": workload.pk, "util_max": window.util_max,
                            "threshold": quota.idle_threshold_percent,
                            "idle_minutes": quota.idle_minutes, "action": quota.idle_action,
                            "stop_at": stop_at.isoformat() if stop_at else None})
        notify_owner(workload, kind="idle_warning",
                     title=f"{workload.name} (#{workload.pk}) is idle", text=text,
                     key=f"idle:{workload.pk}:{now.isoformat()}")
    return state


def _withdraw(state: WorkloadIdle, workload: Workload, *, reason: str, message: str) -> None:
    state.warned_at = state.stop_at = state.warned_util_max = None
    state.save(update_fields=["warned_at", "stop_at", "warned_util_max", "updated_at"])
    workload_event(workload=workload, reason=reason, message=message)


def workload_idle_stop(*, workload: Workload, quota: Quota, window: IdleWindow) -> Workload:
    """Stop a warned workload whose grace passed; the record and history stay."""
    with transaction.atomic():
        state = _locked_state(workload)
        if state.warned_at is None or state.cull_exempt:
            return workload
        reason = (f"stopped as idle: its GPUs stayed under {quota.idle_threshold_percent}% for "
                  f"{quota.idle_minutes} minutes and {quota.idle_grace_minutes} minutes after "
                  "the warning")
        audit_record(actor=None, action="workload.idle_stop", tenant=workload.tenant,
                     target=workload.object_name,
                     before={"state": workload.state,
                             "warned_at": state.warned_at.isoformat()},
                     after={"id": workload.pk, "util_max": window.util_max,
                            "threshold": quota.idle_threshold_percent})
        state.stop_at = None
        state.save(update_fields=["stop_at", "updated_at"])
        return workload_stop(workload=workload, user=None, reason=reason)


class IdleExtendRefused(Exception):
    """"I still need it" for a workload that carries no warning."""


def workload_idle_extend(*, workload: Workload, user: User) -> WorkloadIdle:
    """"I still need it": withdraw the warning; the idle window starts again now."""
    with transaction.atomic():
        state = _locked_state(workload)
        if state.warned_at is None:
            raise IdleExtendRefused(f"{workload.name} carries no idle warning.")
        before = {"warned_at": state.warned_at.isoformat(),
                  "stop_at": state.stop_at.isoformat() if state.stop_at else None}
        state.extended_at = timezone.now()
        state.extended_by = user
        state.save(update_fields=["extended_at", "extended_by", "updated_at"])
        _withdraw(state, workload, reason="IdleExtended",
                  message=f"{user.label} still needs it: the idle warning is withdrawn and "
                          "the idle period starts again.")
        audit_record(actor=user, action="workload.idle_extend", tenant=workload.tenant,
                     target=workload.object_name, before=before,
                     after={"extended_at": state.extended_at.isoformat()})
    return state


def workload_cull_exempt_set(*, workload: Workload, exempt: bool, acting_user: User,
                             note: str = "") -> WorkloadIdle:
    """An admin exempts a workload from idle culling (or ends the exemption)."""
    with transaction.atomic():
        state = _locked_state(workload)
        before = {"cull_exempt": state.cull_exempt, "note": state.exempt_note}
        state.cull_exempt, state.exempt_note = exempt, note[:200] if exempt else ""
        state.save(update_fields=["cull_exempt", "exempt_note", "updated_at"])
        if exempt and state.warned_at is not None:
            _withdraw(state, workload, reason="IdleExempted",
                      message="An administrator exempted it from idle culling.")
        audit_record(actor=acting_user, action="workload.cull_exempt", tenant=workload.tenant,
                     target=workload.object_name, before=before,
                     after={"cull_exempt": exempt, "note": state.exempt_note})
    return state


@dataclasses.dataclass
class IdleReport:
    checked: int = 0
    warned: int = 0
    withdrawn: int = 0
    stopped: int = 0
    failed: int = 0


def workload_idle_check(workload: Workload, *, now: dt.datetime) -> str:
    """One workload's step of the cycle; returns what happened ("" when nothing)."""
    quota = getattr(workload.tenant, "quota", None)
    if quota is None:
        return ""
    state = idle_state_of(workload)
    if state is not None and state.cull_exempt:
        return ""
    if state is not None and state.warned_at is not None:
        busy = GpuSample.objects.filter(workload_id=workload.pk, at__gt=state.warned_at,
                                        at__lte=now,
                                        util__gte=quota.idle_threshold_percent).exists()
        if busy:
            with transaction.atomic():
                locked = _locked_state(workload)
                if locked.warned_at is not None:
                    _withdraw(locked, workload, reason="IdleCleared",
                              message="Its GPUs are in use again: the idle warning is "
                                      "withdrawn.")
            return "withdrawn"
        if state.stop_at is not None and now >= state.stop_at:
            window = idle_window(workload, quota, now=now)
            if not window.idle:  # a gap in telemetry: no stop without fresh idle samples
                return ""
            workload_idle_stop(workload=workload, quota=quota, window=window)
            return "stopped"
        return ""
    window = idle_window(workload, quota, now=now)
    if window.idle:
        workload_idle_warn(workload=workload, quota=quota, window=window, now=now)
        return "warned"
    return ""


def idle_check(*, now: dt.datetime | None = None) -> IdleReport:
    """The culling cycle over every running workload. One workload's failure is logged and
    the others go on."""
    now = now or timezone.now()
    report = IdleReport()
    for workload in running_workloads():
        report.checked += 1
        try:
            outcome = workload_idle_check(workload, now=now)
        except Exception:  # noqa: BLE001 - one workload never stops the cycle
            log.exception("idle check of workload %s failed", workload.pk)
            report.failed += 1
            continue
        if outcome:
            setattr(report, outcome, getattr(report, outcome) + 1)
    return report
