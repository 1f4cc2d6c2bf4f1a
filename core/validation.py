"""What every input of the portal is held to, in one place: the API's fields and query
parameters (api/fields.py wraps these for DRF) and the pages' forms read their times, numbers
and digits through here, and echo what they refuse through `excerpt`.

- `FieldsInvalid(errors)`: the one shape of a refused write, each field → what is wrong with
  it. The domains' validations (a launch, a quota, a budget, notification preferences) raise a
  subclass; the API turns `errors` into its 400 `fields`, the pages into their forms' messages.
- `moment(value)`: a time is ISO 8601 with a zone, between EARLIEST and LATEST. A time
  outside that range means nothing to the portal, and would break the arithmetic done with it
  (a span added to 9999-12-31, an offset of +23:59 taken from 0001-01-01 overflow Python's
  datetime): refused here, before anything adds to it.
- `whole_number(value, low=, high=)`: an int, or text of ASCII digits, within bounds.
  `str.isdigit()` is true of "²" and "٣", which `int()` refuses or reads as 3; a digit is 0-9.
- `excerpt(value)`: what a message may echo of an input: at most a few dozen characters.
- `MomentFormField`: `moment` as a form field (the filtersets' times).
"""

from __future__ import annotations

import datetime as dt
import re
import reprlib
from typing import Any

from django import forms
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

# the range of every time the portal takes: far beyond any booking, budget period or report,
# and far inside what datetime can add a span to or convert between zones
EARLIEST = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
LATEST = dt.datetime(2100, 1, 1, tzinfo=dt.UTC)
RANGE_TEXT = "from 2000-01-01 to 2100-01-01"

_DIGITS = re.compile(r"[0-9]+", re.ASCII)
_WHOLE = re.compile(r"[+-]?[0-9]{1,19}", re.ASCII)
_LONGEST_TIME = 64  # characters: the longest ISO 8601 time with fractions and an offset is ~35

EXCERPT_LENGTH = 40


class FieldsInvalid(ValueError):
    def __init__(self, errors: dict[str, list[str]]):
        super().__init__("; ".join(f"{field}: {' '.join(messages)}"
                                   for field, messages in errors.items()))
        self.errors = errors


class Refused(ValueError):
    """One value refused; the message says what is wanted, for the caller to read."""


class OutOfRange(Refused):
    """A time or date that reads well, outside EARLIEST … LATEST."""


def excerpt(value: Any, limit: int = EXCERPT_LENGTH, *, quotes: bool = True) -> str:
    """`value` as a message may quote it: text between “ ” (or bare), anything else as its
    repr, cut to `limit` characters with "…"."""
    if isinstance(value, str):
        text = value if len(value) <= limit else value[:limit - 1] + "…"
        return f"“{text}”" if quotes else text
    text = reprlib.repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def ascii_digits(text: Any) -> bool:
    """Whether `text` is a string of the digits 0-9 only (not "²", not "٣", not empty)."""
    return isinstance(text, str) and _DIGITS.fullmatch(text) is not None


def as_whole(value: Any) -> int | None:
    """An int (not a bool), or text of ASCII digits with an optional sign, as an int; None for
    anything else."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and _WHOLE.fullmatch(value.strip()):
        return int(value.strip())
    return None


def whole_number(value: Any, *, low: int, high: int, what: str = "A whole number") -> int:
    """`as_whole(value)` from `low` to `high`; else Refused."""
    number = as_whole(value)
    if number is None or not low <= number <= high:
        raise Refused(f"{what} from {low} to {high} is required.")
    return number


def in_range(when: dt.datetime) -> dt.datetime:
    """An aware datetime → the same moment in UTC, if it lies between EARLIEST and LATEST."""
    try:
        utc = when.astimezone(dt.UTC)
    except (OverflowError, ValueError):  # 0001-01-01T00:00+23:59 is before year 1 in UTC
        raise OutOfRange(f"A time {RANGE_TEXT} is required.") from None
    if not EARLIEST <= utc <= LATEST:
        raise OutOfRange(f"A time {RANGE_TEXT} is required.")
    return utc


def moment(value: Any, *, naive_zone: dt.tzinfo | None = None) -> dt.datetime:
    """An ISO 8601 date-time with a zone (text, or a datetime) → an aware UTC datetime between
    EARLIEST and LATEST; else Refused. A naive one is refused, or taken in `naive_zone`."""
    when: dt.datetime | None = None
    if isinstance(value, dt.datetime):
        when = value
    elif isinstance(value, str) and len(value) <= _LONGEST_TIME:
        try:
            when = parse_datetime(value.strip())
        except ValueError:  # well formed, no such time (2026-02-31, an offset of 24 hours)
            when = None
    if when is None:
        raise Refused("A date and time is required, e.g. 2026-12-01T09:00:00Z.")
    if when.tzinfo is None or when.utcoffset() is None:
        if naive_zone is None:
            raise Refused("Give the time zone too (…Z or …+01:00).")
        if not EARLIEST.date() <= when.date() <= LATEST.date():
            raise OutOfRange(f"A time {RANGE_TEXT} is required.")
        when = when.replace(tzinfo=naive_zone)
    return in_range(when)


def day(value: Any) -> dt.date:
    """An ISO 8601 date (2026-12-01) between EARLIEST and LATEST; else Refused."""
    found: dt.date | None = None
    if isinstance(value, str) and len(value) <= _LONGEST_TIME:
        try:
            found = parse_date(value.strip())
        except ValueError:  # well formed, no such day (2026-02-31)
            found = None
    if found is None:
        raise Refused("A date is required, e.g. 2026-12-01.")
    if not EARLIEST.date() <= found <= LATEST.date():
        raise OutOfRange(f"A date {RANGE_TEXT} is required.")
    return found


class MomentFormField(forms.Field):
    """A form's (or a filter's) time, read by `moment`; a naive one in the portal's zone."""

    def to_python(self, value: Any) -> dt.datetime | None:
        if value in self.empty_values:
            return None
        try:
            return moment(value, naive_zone=timezone.get_current_timezone())
        except Refused as exc:
            raise forms.ValidationError(str(exc)) from None


class WholeNumberFormField(forms.IntegerField):
    """A form's (or a query's) whole number, given in ASCII digits only: Django's IntegerField
    reads "\u0661" as 1, so the same figure or object would answer to a second spelling."""

    def to_python(self, value: Any) -> int | None:
        if isinstance(value, str) and not value.strip().isascii():
            raise forms.ValidationError(self.error_messages["invalid"], code="invalid")
        number: int | None = super().to_python(value)
        return number


# Where nothing of a user's (a volume, a dataset, a secret's files) is mounted in a container:
# the system's own trees, the runtime's, and the service account's token. Covering one of them
# hides what the image or the kubelet put there.
CONTAINER_SYSTEM_PATHS = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32",
                          "/proc", "/sbin", "/sys", "/usr", "/var/run", "/var/lib/kubelet",
                          "/run/secrets/kubernetes.io")


def path_overlaps(a: str, b: str) -> bool:
    """Whether one of two normalised absolute paths is the other or lies under it."""
    return a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/")
