"""The one validation of billing's inputs: a month (`2026-11`) and a price sheet. The API's
serializers, the admin's form and the report page wrap it."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal, InvalidOperation
from typing import Any

from django.utils import timezone

from catalogue.models import GpuType
from core.validation import FieldsInvalid, Refused, day, excerpt

from .models import PRICE_DIGITS, PRICE_PLACES, MonthClose

MONTH = re.compile(r"(20[0-9]{2})-(0[1-9]|1[0-2])", re.ASCII)
# a price: at most PRICE's digits, to the hundredth of a cent
PRICE_LIMIT = Decimal(10) ** (PRICE_DIGITS - PRICE_PLACES)
MAX_GPU_PRICES = 200


def month(value: Any) -> dt.date:
    """`YYYY-MM` (2000-01 … 2099-12) as the month's first day; else Refused."""
    found = MONTH.fullmatch(value.strip()) if isinstance(value, str) and len(value) < 16 else None
    if found is None:
        raise Refused("A month is required as YYYY-MM, e.g. 2026-11.")
    return dt.date(int(found[1]), int(found[2]), 1)


MAX_REASON = 2000


def reason(value: Any) -> str:
    """Why a closed month is opened again: text, 1 to MAX_REASON characters; else Refused."""
    text = value.strip() if isinstance(value, str) else ""
    if not text:
        raise Refused("Say why the month is opened again: a reason is required.")
    if len(text) > MAX_REASON or "\x00" in text:  # the database refuses NUL in text
        raise Refused(f"A reason of at most {MAX_REASON} characters, no NUL.")
    return text


def amount(value: Any) -> Decimal:
    """A price: a decimal number written as text (or a JSON number), 0 or more, at most
    PRICE_PLACES decimals; else Refused. Never read through a float."""
    if isinstance(value, bool) or not isinstance(value, str | int | float) or \
            len(str(value)) > 24:
        raise Refused("A price is required as a decimal number, e.g. \"2.50\".")
    try:
        found = Decimal(str(value).strip())
    except InvalidOperation:
        raise Refused(f"{excerpt(value)} is not a decimal number.") from None
    if not found.is_finite() or found < 0 or found >= PRICE_LIMIT:
        raise Refused(f"A price from 0 to below {PRICE_LIMIT} is required.")
    if found != found.quantize(Decimal(1).scaleb(-PRICE_PLACES)):
        raise Refused(f"A price has at most {PRICE_PLACES} decimals.")
    return found.quantize(Decimal(1).scaleb(-PRICE_PLACES))


def last_closed_month() -> dt.date | None:
    return MonthClose.objects.order_by("-month").values_list("month", flat=True).first()


def prices_clean(data: dict[str, Any]) -> dict[str, Any]:
    """A price sheet as written: `effective_from` (a day; default today, never in or before a
    closed month: its statement is frozen), `gpu` {GPU type slug: price per GPU-equivalent
    and hour}, `cpu_hour` and `storage_gib_month` (a price or null: not charged). Returns
    {effective_from, gpu: {GpuType: Decimal}, cpu_hour, storage_gib_month}; FieldsInvalid."""
    errors: dict[str, list[str]] = {}
    cleaned: dict[str, Any] = {"gpu": {}}
    raw_day = data.get("effective_from")
    try:
        cleaned["effective_from"] = (timezone.localdate() if raw_day in (None, "")
                                     else day(raw_day))
    except Refused as exc:
        errors["effective_from"] = [str(exc)]
    else:
        closed = last_closed_month()
        if closed is not None and cleaned["effective_from"] < (
                closed.replace(day=28) + dt.timedelta(days=4)).replace(day=1):
            errors["effective_from"] = [f"{closed:%Y-%m} is closed: its statement is frozen. "
                                        "Prices may change from the first open month on."]
    gpu = data.get("gpu", {})
    if not isinstance(gpu, dict) or len(gpu) > MAX_GPU_PRICES:
        errors["gpu"] = [f"An object of at most {MAX_GPU_PRICES} GPU type slugs → prices is "
                         "required."]
    else:
        types = {t.slug: t for t in GpuType.objects.filter(slug__in=[str(k) for k in gpu])}
        for slug, value in gpu.items():
            if slug not in types:
                errors.setdefault("gpu", []).append(f"No GPU type {excerpt(slug)}.")
                continue
            try:
                cleaned["gpu"][types[slug]] = amount(value)
            except Refused as exc:
                errors.setdefault("gpu", []).append(f"{slug}: {exc}")
    for field in ("cpu_hour", "storage_gib_month"):
        value = data.get(field)
        try:
            cleaned[field] = None if value is None or value == "" else amount(value)
        except Refused as exc:
            errors[field] = [str(exc)]
    if errors:
        raise FieldsInvalid(errors)
    return cleaned
