"""Writes of billing: a price sheet set (audited, before → after), a month closed (its
statement frozen: the lines stored as they are worked out now, audited) and a closed month
opened again by an admin (its statement dropped, audited with the reason)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from audit.services import Actor, audit_record
from catalogue.models import GpuType
from identity.models import User

from .models import GpuPrice, MonthClose, MonthReopen, PriceSheet, StatementLine
from .selectors import lines_computed, month_bounds, month_of


def sheet_snapshot(sheet: PriceSheet | None) -> dict[str, Any] | None:
    if sheet is None:
        return None
    return {"effective_from": sheet.effective_from.isoformat(),
            "gpu": {price.gpu_type.slug: str(price.per_hour)
                    for price in sheet.gpu_prices.select_related("gpu_type")},
            "cpu_hour": None if sheet.cpu_hour is None else str(sheet.cpu_hour),
            "storage_gib_month": (None if sheet.storage_gib_month is None
                                  else str(sheet.storage_gib_month))}


def prices_set(*, acting_user: Actor, effective_from: dt.date, gpu: dict[GpuType, Decimal],
               cpu_hour: Decimal | None, storage_gib_month: Decimal | None) -> PriceSheet:
    """The prices in force from `effective_from` on (validation.prices_clean's): that day's
    sheet made, or replaced whole; earlier sheets stay as they were. Audited prices.set with
    the prices in force that day before and after."""
    user = acting_user if isinstance(acting_user, User) and acting_user.pk else None
    with transaction.atomic():
        before_sheet = (PriceSheet.objects.select_for_update()
                        .filter(effective_from__lte=effective_from)
                        .order_by("-effective_from").first())
        before = sheet_snapshot(before_sheet)
        sheet, _ = PriceSheet.objects.update_or_create(
            effective_from=effective_from,
            defaults={"cpu_hour": cpu_hour, "storage_gib_month": storage_gib_month,
                      "set_by": user})
        sheet.gpu_prices.all().delete()
        GpuPrice.objects.bulk_create(GpuPrice(sheet=sheet, gpu_type=gpu_type, per_hour=price)
                                     for gpu_type, price in gpu.items())
        audit_record(actor=acting_user, action="prices.set",
                     target=f"prices from {effective_from.isoformat()}",
                     before=before, after=sheet_snapshot(sheet))
    return sheet


class MonthRefused(Exception):
    code = "month_refused"


class MonthNotOver(MonthRefused):
    code = "month_not_over"


class MonthClosedAlready(MonthRefused):
    code = "month_closed"


class MonthRunning(MonthRefused):
    """The month now running (or one to come): never closed, nothing to open."""

    code = "month_running"


class MonthNotClosed(MonthRefused):
    code = "month_not_closed"


def month_close(*, month: dt.date, acting_user: Actor, now: dt.datetime | None = None
                ) -> MonthClose:
    """Freeze the month's statement: its lines, worked out now, stored; its reports read them
    from then on, whatever the prices become. Only once the month is over (MonthNotOver),
    once (MonthClosedAlready). Audited month.close."""
    now = now or timezone.now()
    month = month.replace(day=1)
    if month_bounds(month)[1] > now:
        raise MonthNotOver(f"{month:%Y-%m} is not over yet.")
    lines = lines_computed(month, now=now)
    user = acting_user if isinstance(acting_user, User) and acting_user.pk else None
    try:
        with transaction.atomic():
            closed = MonthClose.objects.create(month=month, closed_by=user,
                                               currency=settings.PORTAL_BILLING_CURRENCY)
            StatementLine.objects.bulk_create(
                StatementLine(month=closed, tenant_id=ln.who.tenant_id, tenant_name=ln.who.tenant,
                              department=ln.who.department, pi=ln.who.pi_id, pi_name=ln.who.pi,
                              grants=list(ln.who.grants), resource=ln.resource,
                              gpu_type=ln.gpu_type, quantity=ln.quantity,
                              unit_price=ln.unit_price, cost=ln.cost,
                              price_from=ln.price_from, price_until=ln.price_until)
                for ln in lines)
            audit_record(actor=acting_user, action="month.close", target=f"{month:%Y-%m}",
                         after={"month": f"{month:%Y-%m}", "lines": len(lines),
                                "cost": str(sum((ln.cost for ln in lines), Decimal("0.00"))),
                                "currency": closed.currency})
    except IntegrityError:  # closed meanwhile (the beat and an admin at once)
        raise MonthClosedAlready(f"{month:%Y-%m} is closed already.") from None
    return closed


def month_reopen(*, month: dt.date, acting_user: Actor, reason: str,
                 now: dt.datetime | None = None) -> MonthReopen:
    """Open a closed month again (validation.reason's `reason`): its frozen statement dropped,
    so that its reports are worked out afresh from the runs and the prices (a later
    month_close freezes them anew), and the beat leaves it to an admin from then on.
    MonthRunning for the month now running or one to come, MonthNotClosed for one not closed.
    Audited month.reopen, the statement's summary before, the reason after."""
    now = now or timezone.now()
    month = month.replace(day=1)
    if month_bounds(month)[1] > now:
        raise MonthRunning(f"{month:%Y-%m} is not over: it was never closed.")
    user = acting_user if isinstance(acting_user, User) and acting_user.pk else None
    with transaction.atomic():
        closed = MonthClose.objects.select_for_update().filter(month=month).first()
        if closed is None:
            raise MonthNotClosed(f"{month:%Y-%m} is not closed.")
        lines = list(closed.lines.values_list("cost", flat=True))
        before = {"month": f"{month:%Y-%m}", "closed_at": closed.closed_at.isoformat(),
                  "closed_by": closed.closed_by.label if closed.closed_by else None,
                  "lines": len(lines), "cost": str(sum(lines, Decimal("0.00"))),
                  "currency": closed.currency}
        closed.delete()  # its lines with it
        reopened = MonthReopen.objects.create(month=month, reason=reason, reopened_by=user)
        audit_record(actor=acting_user, action="month.reopen", target=f"{month:%Y-%m}",
                     before=before, after={"month": f"{month:%Y-%m}", "reason": reason})
    return reopened


def months_close_due(*, now: dt.datetime | None = None) -> MonthClose | None:
    """The beat's: the month before this one closed once PORTAL_BILLING_CLOSE_DELAY_HOURS have
    passed since it ended (runs the tracker recorded late still count), unless an admin closed
    it or opened it again. Older open months are left to an admin: a new site's history is not frozen unasked."""
    now = now or timezone.now()
    this_month = month_of(now)
    previous = (this_month - dt.timedelta(days=1)).replace(day=1)
    if now - month_bounds(previous)[1] < dt.timedelta(hours=settings.PORTAL_BILLING_CLOSE_DELAY_HOURS):
        return None
    if MonthClose.objects.filter(month=previous).exists() or \
            MonthReopen.objects.filter(month=previous).exists():  # an admin's to close again
        return None
    try:
        return month_close(month=previous, acting_user=None, now=now)
    except MonthClosedAlready:
        return None
