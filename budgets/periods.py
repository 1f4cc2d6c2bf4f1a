"""A budget's periods: month, quarter or year, starting at midnight in the portal's time zone
(settings.TIME_ZONE), so that "November" means the site's November."""

from __future__ import annotations

import datetime as dt

from django.utils import timezone


def _first_month(period: str, month: int) -> int:
    if period == "year":
        return 1
    if period == "quarter":
        return 3 * ((month - 1) // 3) + 1
    return month


def period_bounds(period: str, at: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    """[start, next start) of the `period` ("month", "quarter", "year") holding `at`, as aware
    datetimes in the portal's time zone."""
    local = timezone.localtime(at)
    start_month = _first_month(period, local.month)
    months = {"month": 1, "quarter": 3, "year": 12}[period]
    end_year, end_month = divmod(start_month - 1 + months, 12)
    zone = timezone.get_current_timezone()
    start = dt.datetime(local.year, start_month, 1, tzinfo=zone)
    end = dt.datetime(local.year + end_year, end_month + 1, 1, tzinfo=zone)
    return start, end


def period_label(period: str, start: dt.datetime) -> str:
    """"November 2026", "Q4 2026", "2026"."""
    local = timezone.localtime(start)
    if period == "year":
        return f"{local.year}"
    if period == "quarter":
        return f"Q{(local.month - 1) // 3 + 1} {local.year}"
    return local.strftime("%B %Y")
