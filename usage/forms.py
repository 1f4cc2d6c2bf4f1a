"""The one validation of a usage report query, shared by `GET /api/v1/usage/` and the pages."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django import forms
from django.utils import timezone

from core.validation import OutOfRange, Refused, WholeNumberFormField, day, in_range, moment

GROUP_BY = ("tenant", "user", "gpu_type", "workload", "day", "cluster")
DEFAULT_DAYS = 30
MAX_DAYS = 3660


def _moment(text: str, *, end_of_day: bool) -> dt.datetime:
    """ISO 8601 date or date-time; a date is the start of that day (for `until`: of the next
    one, so until=2025-01-31 includes the 31st); naive times are in the portal's time zone.
    Within core.validation's range."""
    text = text.strip()
    zone = timezone.get_current_timezone()
    try:
        if len(text) > 10:
            return moment(text.replace(" ", "T", 1), naive_zone=zone)
        start = day(text)
        return in_range(dt.datetime.combine(start + dt.timedelta(days=1 if end_of_day else 0),
                                            dt.time(), tzinfo=zone))
    except OutOfRange as exc:
        raise forms.ValidationError(str(exc)) from None
    except Refused:
        raise forms.ValidationError("Use an ISO 8601 date (2025-01-31) or date-time "
                                    "(2025-01-31T12:00:00Z).") from None


class UsageQueryForm(forms.Form):
    since = forms.CharField(required=False)
    until = forms.CharField(required=False)
    group_by = forms.ChoiceField(choices=[(g, g) for g in GROUP_BY], required=False)
    tenant = forms.CharField(required=False, max_length=255,
                             help_text="tenant id or name (admins; others: their own)")
    workload = WholeNumberFormField(required=False, min_value=1)

    def clean_since(self) -> dt.datetime | None:
        value = self.cleaned_data.get("since")
        return _moment(value, end_of_day=False) if value else None

    def clean_until(self) -> dt.datetime | None:
        value = self.cleaned_data.get("until")
        return _moment(value, end_of_day=True) if value else None

    def clean_group_by(self) -> str:
        return self.cleaned_data.get("group_by") or "tenant"

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if self.errors:
            return data
        now = timezone.now()
        until = data.get("until") or now
        since = data.get("since") or until - dt.timedelta(days=DEFAULT_DAYS)
        if since >= until:
            self.add_error("until", "Must be after since.")
        elif until - since > dt.timedelta(days=MAX_DAYS):
            self.add_error("since", f"At most {MAX_DAYS} days at once.")
        data["since"], data["until"] = since, until
        return data
