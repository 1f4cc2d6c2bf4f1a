"""Writes of the allocations domain: a project's record (audited, before → after) and the
beat's notices of an allocation's end."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from audit.services import Actor, audit_record
from budgets.selectors import budget_of
from budgets.services import budget_delete, budget_set
from calendars.models import ReservationAllowance
from calendars.services import CalendarRefused, allowance_set, reservation_create
from calendars.validation import reservation_clean
from catalogue.models import GpuType
from core.validation import FieldsInvalid
from identity.selectors import site_admins
from notifications.models import Kind
from notifications.selectors import project_managers
from notifications.services import notify
from tenants.figures import AdjustmentLine
from tenants.models import Quota, QuotaAdjustment, Tenant
from tenants.services import quota_adjustments_set, quota_snapshot, quota_update

from .admission import ended_text
from .models import ProjectRecord, ResourceRequest
from .selectors import record_of, records_ended, records_ending

RECORD_FIELDS = ("principal_investigator", "grants", "research_field", "allocation_ends")


def record_snapshot(record: ProjectRecord) -> dict[str, Any]:
    pi = record.principal_investigator
    return {"principal_investigator": pi.username if pi is not None else None,
            "grants": list(record.grants or []), "research_field": record.research_field,
            "allocation_ends": (record.allocation_ends.isoformat()
                                if record.allocation_ends is not None else None)}


def record_set(*, tenant: Tenant, acting_user: Actor, changes: dict[str, Any]) -> ProjectRecord:
    """Validated changes of the project's record (allocations/api/serializers.py, the page's
    form). A new end date is told afresh when it comes near. Audited."""
    with transaction.atomic():
        Tenant.objects.select_for_update().get(pk=tenant.pk)  # serialise with admission
        record, _ = ProjectRecord.objects.select_for_update().get_or_create(tenant=tenant)
        before = record_snapshot(record)
        for field in RECORD_FIELDS:
            if field in changes:
                setattr(record, field, changes[field])
        after = record_snapshot(record)
        if after != before:
            record.save()
            audit_record(actor=acting_user, action="record.update", tenant=tenant,
                         target=tenant.namespace, before=before, after=after)
    return record


@dataclasses.dataclass
class NoticeResult:
    ending: list[str] = dataclasses.field(default_factory=list)
    ended: list[str] = dataclasses.field(default_factory=list)


def _recipients(record: ProjectRecord) -> list[Any]:
    people = project_managers(record.tenant)
    if record.principal_investigator is not None:
        people.append(record.principal_investigator)
    return people


def allocations_notify(*, today: dt.date | None = None) -> NoticeResult:
    """The beat's cycle: the managers and the principal investigator of each project whose
    allocation ends within PORTAL_ALLOCATION_NOTICE_DAYS are told once, and once more when it
    is past and launches are held."""
    today = today or timezone.localdate()
    result = NoticeResult()
    link = reverse("allocations:record")
    for record in records_ending(today):
        with transaction.atomic():
            if not ProjectRecord.objects.filter(pk=record.pk).exclude(
                    ending_told_for=record.allocation_ends).update(
                    ending_told_for=record.allocation_ends):
                continue  # another beat told it
            tenant, ends = record.tenant, record.allocation_ends
            notify(kind=Kind.ALLOCATION, users=_recipients(record), tenant=tenant,
                   title=f"{tenant.name}: its allocation ends on {ends:%Y-%m-%d}",
                   text=(f"The allocation of {tenant.name} runs until {ends:%Y-%m-%d}; after "
                         "that day new launches are held until it is renewed. Ask for a "
                         "renewal with a request."),
                   key=f"allocation-ending:{record.pk}:{ends:%Y-%m-%d}", link=link)
            result.ending.append(tenant.name)
    for record in records_ended(today):
        with transaction.atomic():
            if not ProjectRecord.objects.filter(pk=record.pk).exclude(
                    ended_told_for=record.allocation_ends).update(
                    ended_told_for=record.allocation_ends):
                continue
            tenant, ends = record.tenant, record.allocation_ends
            notify(kind=Kind.ALLOCATION, users=_recipients(record), tenant=tenant,
                   title=f"{tenant.name}: its allocation ended, launches are held",
                   text=ended_text(tenant, record),
                   key=f"allocation-ended:{record.pk}:{ends:%Y-%m-%d}", link=link)
            audit_record(actor=None, action="record.held", tenant=tenant,
                         target=tenant.namespace, after={"allocation_ends": f"{ends:%Y-%m-%d}"})
            result.ended.append(tenant.name)
    return result


# --- requests ----------------------------------------------------------------------------------

class RequestRefused(Exception):
    """A decision the request's state or the decider refuses; `code` says which."""

    code = "request_refused"


class RequestDecided(RequestRefused):
    code = "request_decided"


class OwnRequest(RequestRefused):
    code = "own_request"


class RequestNotApplicable(RequestRefused):
    """Approving it failed in the service that applies it (the calendar full, a GPU type
    gone): the request stays pending, the detail says why."""

    code = "request_not_applicable"


def _people(request: ResourceRequest) -> list[Any]:
    people = project_managers(request.tenant)
    if request.asker is not None and all(p.pk != request.asker.pk for p in people):
        people.append(request.asker)
    return people


def _tell(request: ResourceRequest, step: str, title: str, text: str) -> None:
    notify(kind=Kind.REQUEST, users=_people(request), tenant=request.tenant, title=title,
           text=text, key=f"request:{request.pk}:{step}", link=reverse("allocations:requests"))


def _deciders(request: ResourceRequest, acting: Any) -> list[Any]:
    """Who may decide it: the site's admins and its project's department's admins (the managers
    of the department's Keystone project), less `acting`, who knows what they did."""
    people = list(site_admins().order_by("pk"))
    department = request.tenant.department
    if department is not None and department.keystone_project_id:
        people += [p for p in project_managers(department) if all(p.pk != q.pk for q in people)]
    acting_pk = getattr(acting, "pk", None)
    return [p for p in people if p.pk != acting_pk]


def _tell_deciders(request: ResourceRequest, step: str, acting: Any, title: str,
                   text: str) -> None:
    """Tell those who decide (a key of its own: an admin who also manages the project hears
    of it once as each); the link is their queue of pending requests."""
    notify(kind=Kind.REQUEST, users=_deciders(request, acting), tenant=request.tenant,
           title=title, text=text, key=f"request:{request.pk}:{step}",
           link=reverse("allocations:requests"))


def request_words(request: ResourceRequest) -> str:
    """What it asks, in words: "4 more a100", "a budget of 2000 GPU-hours"."""
    details, kind = request.details, request.kind
    words = {ResourceRequest.Kind.QUOTA: lambda: f"{details['gpus']} more {details['gpu_type']}",
             ResourceRequest.Kind.BUDGET: lambda: f"a budget of {details['gpu_hours']} GPU-hours",
             ResourceRequest.Kind.ALLOWANCE: lambda: (f"a reservation allowance of "
                                                      f"{details['gpu_hours']} GPU-hours"),
             ResourceRequest.Kind.RESERVATION: lambda: (
                 f"a reservation of {details.get('count')} {details.get('gpu_type')} from "
                 f"{details.get('start')} to {details.get('end')}"),
             ResourceRequest.Kind.RENEWAL: lambda: (f"the allocation renewed until "
                                                    f"{details['allocation_ends']}")}[
        ResourceRequest.Kind(kind)]()
    if request.ends_at is not None:
        words += f" until {timezone.localtime(request.ends_at):%Y-%m-%d %H:%M}"
    return words


def request_create(*, tenant: Tenant, asker: Any, fields: dict[str, Any]) -> ResourceRequest:
    """A request from validated fields (allocations.validation.request_clean). Audited; the
    asker and the project's managers are told."""
    with transaction.atomic():
        request = ResourceRequest.objects.create(tenant=tenant, asker=asker, **fields)
        audit_record(actor=asker, action="request.create", tenant=tenant,
                     target=f"request {request.pk}",
                     after={"kind": request.kind, "details": request.details,
                            "ends_at": request.ends_at.isoformat() if request.ends_at else None})
        _tell(request, "asked", f"{tenant.name}: request {request.pk} asks for "
                                f"{request_words(request)}",
              f"{asker.label if asker else 'someone'} asked: {request.justification}")
        _tell_deciders(request, "to-decide", asker,
                       f"{tenant.name}: request {request.pk} waits for a decision",
                       f"{asker.label if asker else 'someone'} asked for "
                       f"{request_words(request)}: {request.justification}")
    return request


class NotTheAsker(RequestRefused):
    """Only the one who asked changes a request (403)."""

    code = "not_the_asker"


def request_change(*, request: ResourceRequest, asker: Any,
                   fields: dict[str, Any]) -> ResourceRequest:
    """The asker's change of their pending request: validated fields of the same kind
    (allocations.validation.request_clean) in place of the old. Audited, before → after; the
    project's managers and those who decide it are told, the asker not (they made it).
    RequestDecided once decided, NotTheAsker for anyone else."""
    with transaction.atomic():
        row = ResourceRequest.objects.select_for_update(of=("self",)).select_related(
            "tenant", "asker").get(pk=request.pk)
        if row.asker_id is None or row.asker_id != getattr(asker, "pk", None):
            raise NotTheAsker("Only the one who asked changes a request.")
        if row.state != ResourceRequest.State.PENDING:
            raise RequestDecided(f"Request {row.pk} was {row.state} already.")
        before = {"details": row.details, "justification": row.justification,
                  "ends_at": row.ends_at.isoformat() if row.ends_at else None}
        row.details, row.justification, row.ends_at = (
            fields["details"], fields["justification"], fields["ends_at"])
        row.save(update_fields=["details", "justification", "ends_at"])
        after = {"details": row.details, "justification": row.justification,
                 "ends_at": row.ends_at.isoformat() if row.ends_at else None}
        audited = audit_record(actor=asker, action="request.change", tenant=row.tenant,
                               target=f"request {row.pk}", before=before, after=after)
        step = f"changed:{audited.pk}"  # each change an event of its own
        title = f"{row.tenant.name}: request {row.pk} changed by its asker"
        text = f"{asker.label} changed it: now {request_words(row)}. {row.justification}"
        notify(kind=Kind.REQUEST, users=[p for p in project_managers(row.tenant)
                                         if p.pk != asker.pk],
               tenant=row.tenant, title=title, text=text, key=f"request:{row.pk}:{step}",
               link=reverse("allocations:requests"))
        _tell_deciders(row, f"{step}:to-decide", asker, title, text)
    return row


def _request_lines(tenant: Tenant, now: dt.datetime) -> list[AdjustmentLine]:
    """Every temporary quota grant of the tenant in force: the request source's rows."""
    granted = ResourceRequest.objects.filter(
        tenant=tenant, kind=ResourceRequest.Kind.QUOTA, state=ResourceRequest.State.APPROVED,
        ends_at__gt=now)
    return [AdjustmentLine(source=QuotaAdjustment.Source.REQUEST,
                           gpu_type=row.details["gpu_type"], gpus=row.details["gpus"],
                           ref=f"request:{row.pk}", reason=f"request {row.pk}",
                           starts_at=row.decided_at, ends_at=row.ends_at)
            for row in granted.order_by("pk")]


def _apply(request: ResourceRequest, decider: Any, now: dt.datetime) -> dict[str, Any]:
    """The change, through the service an admin's edit uses; answers before → after."""
    tenant, details = request.tenant, request.details
    if request.kind == ResourceRequest.Kind.QUOTA:
        slug, gpus = details["gpu_type"], details["gpus"]
        if request.ends_at is not None:  # a temporary grant: an adjustment that ends by itself
            before_lines = len(_request_lines(tenant, now)) - 1
            quota_adjustments_set(tenant=tenant, source=QuotaAdjustment.Source.REQUEST,
                                  adjustments=_request_lines(tenant, now),
                                  reason=f"request {request.pk} approved", acting_user=decider)
            return {"before": {"grants": before_lines},
                    "after": {"gpu_type": slug, "gpus": gpus,
                              "until": request.ends_at.isoformat()}}
        quota = Quota.objects.get(tenant=tenant)
        before = quota_snapshot(quota)
        gpu_type = GpuType.objects.get(slug=slug)
        by_type = dict(before["gpus_by_type"])
        by_type[slug] = by_type.get(slug, 0) + gpus
        total = before["gpus_total"] + math.ceil(gpus * gpu_type.gpu_fraction)
        quota = quota_update(tenant=tenant, acting_user=decider,
                             changes={"gpus_by_type": by_type, "gpus_total": total})
        after = quota_snapshot(quota)
        return {"before": {"gpus_total": before["gpus_total"],
                           "gpus_by_type": before["gpus_by_type"]},
                "after": {"gpus_total": after["gpus_total"],
                          "gpus_by_type": after["gpus_by_type"]}}
    if request.kind == ResourceRequest.Kind.BUDGET:
        budget = budget_of(tenant)
        before_hours = float(budget.gpu_hours) if budget is not None else None
        budget_set(tenant=tenant, acting_user=decider,
                   fields={"gpu_hours": Decimal(details["gpu_hours"])})
        return {"before": {"gpu_hours": before_hours},
                "after": {"gpu_hours": float(details["gpu_hours"])}}
    if request.kind == ResourceRequest.Kind.ALLOWANCE:
        allowance = ReservationAllowance.objects.filter(tenant=tenant).first()
        before_hours = allowance.gpu_hours if allowance is not None else 0
        days = allowance.max_days_ahead if allowance is not None else \
            ReservationAllowance._meta.get_field("max_days_ahead").get_default()
        allowance_set(tenant=tenant, acting_user=decider, gpu_hours=details["gpu_hours"],
                      max_days_ahead=days)
        return {"before": {"gpu_hours": before_hours},
                "after": {"gpu_hours": details["gpu_hours"]}}
    if request.kind == ResourceRequest.Kind.RESERVATION:
        try:
            fields = reservation_clean(details, now=now)
        except FieldsInvalid as exc:
            raise RequestNotApplicable(f"The booking is no longer valid: {exc}") from None
        try:
            reservation = reservation_create(tenant=tenant, acting_user=decider, fields=fields,
                                             within_allowance=False)
        except CalendarRefused as exc:
            raise RequestNotApplicable(str(exc)) from None
        return {"before": None, "after": {"reservation": reservation.pk}}
    record = record_of(tenant)
    before = record_snapshot(record)["allocation_ends"]
    record_set(tenant=tenant, acting_user=decider,
               changes={"allocation_ends": dt.date.fromisoformat(details["allocation_ends"])})
    return {"before": {"allocation_ends": before},
            "after": {"allocation_ends": details["allocation_ends"]}}


def _decidable(request_id: int, decider: Any) -> ResourceRequest:
    request = ResourceRequest.objects.select_for_update(of=("self",)).select_related(
        "tenant", "asker").get(pk=request_id)
    if request.state != ResourceRequest.State.PENDING:
        raise RequestDecided(f"Request {request.pk} was {request.state} already.")
    if request.asker_id is not None and request.asker_id == getattr(decider, "pk", None):
        raise OwnRequest("Nobody decides their own request: another admin or department "
                         "admin does.")
    return request


def request_approve(*, request: ResourceRequest, decider: Any, note: str) -> ResourceRequest:
    """Apply the request and mark it approved, in one transaction: a refusal of the service
    that applies it leaves it pending (RequestNotApplicable). Audited, before → after; the
    asker and the project's managers are told."""
    now = timezone.now()
    with transaction.atomic():
        row = _decidable(request.pk, decider)
        row.state, row.note, row.decided_by, row.decided_at = (
            ResourceRequest.State.APPROVED, note, decider, now)
        row.save(update_fields=["state", "note", "decided_by", "decided_at"])
        row.applied = _apply(row, decider, now)
        row.save(update_fields=["applied"])
        audit_record(actor=decider, action="request.approve", tenant=row.tenant,
                     target=f"request {row.pk}", before=row.applied["before"],
                     after=row.applied["after"])
        _tell(row, "approved", f"{row.tenant.name}: request {row.pk} approved",
              f"{request_words(row)}: approved by {decider.label}, applied now."
              + (f" Note: {note}" if note else ""))
    return row


def request_deny(*, request: ResourceRequest, decider: Any, note: str) -> ResourceRequest:
    with transaction.atomic():
        row = _decidable(request.pk, decider)
        row.state, row.note, row.decided_by, row.decided_at = (
            ResourceRequest.State.DENIED, note, decider, timezone.now())
        row.save(update_fields=["state", "note", "decided_by", "decided_at"])
        audit_record(actor=decider, action="request.deny", tenant=row.tenant,
                     target=f"request {row.pk}", after={"note": note})
        _tell(row, "denied", f"{row.tenant.name}: request {row.pk} denied",
              f"{request_words(row)}: denied by {decider.label}." + (f" Note: {note}"
                                                                     if note else ""))
    return row


def requests_end(*, now: dt.datetime | None = None) -> list[int]:
    """The beat's cycle: every approved temporary grant whose end has come is taken back (a
    quota's adjustment is already out of force by its end; its row goes; a budget or allowance
    returns to what it was before), marked ended, audited and told. Idempotent."""
    now = now or timezone.now()
    ended: list[int] = []
    due = ResourceRequest.objects.filter(state=ResourceRequest.State.APPROVED,
                                         ends_at__lte=now).values_list("pk", flat=True)
    for pk in list(due):
        with transaction.atomic():
            row = ResourceRequest.objects.select_for_update(of=("self",)).select_related(
                "tenant", "asker").filter(pk=pk, state=ResourceRequest.State.APPROVED).first()
            if row is None:
                continue  # another beat took it back
            before = (row.applied or {}).get("before") or {}
            if row.kind == ResourceRequest.Kind.QUOTA:
                quota_adjustments_set(tenant=row.tenant, source=QuotaAdjustment.Source.REQUEST,
                                      adjustments=_request_lines(row.tenant, now),
                                      reason=f"request {row.pk} ended")
            elif row.kind == ResourceRequest.Kind.BUDGET:
                if before.get("gpu_hours") is None:
                    budget_delete(tenant=row.tenant, acting_user=None)
                else:
                    budget_set(tenant=row.tenant, acting_user=None,
                               fields={"gpu_hours": Decimal(str(before["gpu_hours"]))})
            elif row.kind == ResourceRequest.Kind.ALLOWANCE:
                allowance = ReservationAllowance.objects.get(tenant=row.tenant)
                allowance_set(tenant=row.tenant, acting_user=None,
                              gpu_hours=int(before.get("gpu_hours") or 0),
                              max_days_ahead=allowance.max_days_ahead)
            row.state, row.ended_at = ResourceRequest.State.ENDED, now
            row.save(update_fields=["state", "ended_at"])
            audit_record(actor=None, action="request.end", tenant=row.tenant,
                         target=f"request {row.pk}", before=(row.applied or {}).get("after"),
                         after=before or None)
            _tell(row, "ended", f"{row.tenant.name}: request {row.pk}'s grant ended",
                  f"{request_words(row)}: the grant ended as approved; what it raised is back "
                  "to what it was.")
            ended.append(row.pk)
    return ended
