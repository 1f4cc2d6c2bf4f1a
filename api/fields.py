"""The API's reading of times and numbers, through core/validation.py: a DRF field for the
bodies' whole numbers, and the query parameters that views read themselves. A value out of
range or not ASCII digits is a 400 with the field named, never a 500 from arithmetic done with
it later."""

from __future__ import annotations

import datetime as dt
from typing import Any

from rest_framework import exceptions, serializers
from rest_framework.request import Request

from core.validation import Refused, ascii_digits, moment, whole_number


class WholeNumberField(serializers.IntegerField):
    """DRF's IntegerField, with a number given as text of ASCII digits only (int() reads "٣"
    as 3)."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, str) and not data.isascii():
            self.fail("invalid")
        return super().to_internal_value(data)


def query_moment(request: Request, name: str, default: dt.datetime) -> dt.datetime:
    """The query parameter `name` as a time (core.validation.moment), `default` when absent."""
    raw = request.query_params.get(name)
    if not raw:
        return default
    try:
        return moment(raw)
    except Refused as exc:
        raise exceptions.ValidationError({name: [str(exc)]}) from None


def query_number(request: Request, name: str, *, low: int, high: int, default: int) -> int:
    """The query parameter `name` as a whole number from `low` to `high`, `default` when
    absent."""
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        return whole_number(raw, low=low, high=high)
    except Refused as exc:
        raise exceptions.ValidationError({name: [str(exc)]}) from None


def query_digits(request: Request, name: str) -> int | None:
    """The query parameter `name` when it is ASCII digits (an id, a rank), as an int; None
    when absent or anything else."""
    raw = request.query_params.get(name, "")
    return int(raw) if ascii_digits(raw) and len(raw) <= 18 else None
