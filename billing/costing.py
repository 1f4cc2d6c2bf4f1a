"""Pure: how a month's use becomes money. No database here: selectors.py reads the runs, the
volumes and the prices, statement lines come back.

Money is exact. Quantities are kept as fractions (a run's microseconds × its GPUs × the part
of a GPU a unit of its type is ÷ an hour's microseconds) until a line's cost is worked out; a
line's cost is that exact quantity × the price, rounded once, half up, to the cent. A report's
figures are sums of its lines' costs, so it adds up to the cent whatever the grouping. A line
is one tenant's use of one resource (GPU-hours of a type, CPU-hours, storage GiB-months) under
one price: a month whose prices changed has a line per price in force.
"""

from __future__ import annotations

import calendar
import dataclasses
import datetime as dt
import math
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Any

CENT = Decimal("0.01")
QUANTITY_PLACES = 6  # a statement keeps quantities to the millionth
SHOWN_PLACES = 4  # reports show them to the ten-thousandth (an hour: 0.36 s)
HOUR_MICROSECONDS = 3600 * 1_000_000
GPU, CPU, STORAGE = "gpu", "cpu", "storage"
BY_TYPE = "gpu_hours_"  # a GPU type's hours' column: gpu_hours_<slug>
GROUPINGS = ("department", "tenant", "pi", "grant")
# each grouping's key columns, as the report names them
GROUP_COLUMNS = {"department": ["department"], "tenant": ["tenant_id", "tenant"],
                 "pi": ["pi_id", "pi"], "grant": ["grant"]}


def round_half_up(value: Fraction, places: int) -> Decimal:
    """`value` (never negative) to `places` decimals, a half rounded up: exact, no float."""
    scale = 10 ** places
    return Decimal(math.floor(value * scale + Fraction(1, 2))).scaleb(-places)


def money(value: Fraction) -> Decimal:
    return round_half_up(value, 2).quantize(CENT)


@dataclasses.dataclass(frozen=True)
class Who:
    """A tenant as a statement groups it: its department, principal investigator, grants."""

    tenant_id: int | None
    tenant: str
    department: str = ""
    pi_id: str = ""
    pi: str = ""
    grants: tuple[str, ...] = ()

    def key(self, group_by: str) -> tuple[Any, ...]:
        return {"department": (self.department,), "tenant": (self.tenant_id, self.tenant),
                "pi": (self.pi_id, self.pi), "grant": (" + ".join(self.grants),)}[group_by]


@dataclasses.dataclass(frozen=True)
class Line:
    """One statement line: `quantity` (GPU-hours in GPU-equivalents, CPU-hours or GiB-months,
    to the millionth), the price it was charged at (None: not charged) and its cost."""

    who: Who
    resource: str
    gpu_type: str  # a GPU line's type slug; "" otherwise
    quantity: Decimal
    unit_price: Decimal | None
    cost: Decimal
    price_from: dt.datetime
    price_until: dt.datetime


def line(who: Who, resource: str, gpu_type: str, quantity: Fraction, price: Decimal | None,
         span: tuple[dt.datetime, dt.datetime]) -> Line:
    """A line from its exact quantity: the cost rounded once, half up, to the cent."""
    cost = money(quantity * Fraction(price)) if price is not None else Decimal("0.00")
    return Line(who=who, resource=resource, gpu_type=gpu_type,
                quantity=round_half_up(quantity, QUANTITY_PLACES), unit_price=price, cost=cost,
                price_from=span[0], price_until=span[1])


def run_gpu_hours(run: dt.timedelta, gpus: int, numerator: int, denominator: int) -> Fraction:
    """GPU-hours in GPU-equivalents: the run × its GPUs × the part of a GPU a unit is."""
    return Fraction(run // dt.timedelta(microseconds=1) * gpus * (numerator or 1),
                    HOUR_MICROSECONDS * (denominator or 1))


def run_cpu_hours(run: dt.timedelta, cpus: int) -> Fraction:
    return Fraction(run // dt.timedelta(microseconds=1) * cpus, HOUR_MICROSECONDS)


def gib_months(gib_days: Fraction, month_start: dt.date) -> Fraction:
    """GiB-days as GiB-months of that month: a GiB held the whole month is one GiB-month."""
    return gib_days / calendar.monthrange(month_start.year, month_start.month)[1]


def segments(start: dt.datetime, end: dt.datetime,
             changes: Sequence[tuple[dt.datetime, Any]]) -> list[tuple[dt.datetime, dt.datetime,
                                                                       Any]]:
    """[start, end) cut where the prices change: (from, until, the sheet in force). `changes`
    are (the moment a sheet takes effect, the sheet), in time order; before the first one no
    sheet is in force (None)."""
    found: list[tuple[dt.datetime, dt.datetime, Any]] = []
    current: Any = None
    cut = start
    for at, sheet in changes:
        if at <= start:
            current = sheet
            continue
        if at >= end:
            break
        found.append((cut, at, current))
        cut, current = at, sheet
    if cut < end:
        found.append((cut, end, current))
    return found


def gpu_types_of(lines: Iterable[Line]) -> list[str]:
    return sorted({ln.gpu_type for ln in lines if ln.resource == GPU})


def report_columns(group_by: str, gpu_types: list[str]) -> list[str]:
    return (GROUP_COLUMNS[group_by] + ["projects", "gpu_hours"]
            + [f"{BY_TYPE}{slug}" for slug in gpu_types]
            + ["cpu_hours", "storage_gib_months", "gpu_cost", "cpu_cost", "storage_cost",
               "cost", "currency"])


def report_cell(row: Mapping[str, Any], column: str) -> Any:
    """A row's value under one of report_columns (a GPU type's hours from its by-type map)."""
    if column.startswith(BY_TYPE) and column not in row:
        return row.get("gpu_hours_by_type", {}).get(column[len(BY_TYPE):])
    return row.get(column)


def _shown(value: Decimal) -> Decimal:
    return value.quantize(Decimal(1).scaleb(-SHOWN_PLACES))


def _figures(lines: list[Line], gpu_types: list[str], currency: str) -> dict[str, Any]:
    by_type = {slug: sum((ln.quantity for ln in lines
                          if ln.resource == GPU and ln.gpu_type == slug), Decimal(0))
               for slug in gpu_types}

    def total(resource: str, what: str) -> Decimal:
        return sum((getattr(ln, what) for ln in lines if ln.resource == resource), Decimal(0))

    costs = {resource: total(resource, "cost").quantize(CENT) for resource in (GPU, CPU, STORAGE)}
    return {
        "projects": len({ln.who.tenant_id if ln.who.tenant_id is not None else ln.who.tenant
                         for ln in lines}),
        "gpu_hours": _shown(sum(by_type.values(), Decimal(0))),
        "gpu_hours_by_type": {slug: _shown(hours) for slug, hours in by_type.items()},
        "cpu_hours": _shown(total(CPU, "quantity")),
        "storage_gib_months": _shown(total(STORAGE, "quantity")),
        "gpu_cost": costs[GPU], "cpu_cost": costs[CPU], "storage_cost": costs[STORAGE],
        "cost": sum(costs.values(), Decimal(0)).quantize(CENT), "currency": currency,
    }


def report_rows(lines: list[Line], group_by: str, currency: str
                ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per group of `group_by` its GPU-hours (all, and by type), CPU-hours, storage GiB-months
    and costs, ordered by the group's name; and the totals. Every sum is of the lines'
    figures: a group's cost is its lines' costs added, never rounded again."""
    gpu_types = gpu_types_of(lines)
    groups: dict[tuple[Any, ...], list[Line]] = {}
    for ln in lines:
        groups.setdefault(ln.who.key(group_by), []).append(ln)
    names = GROUP_COLUMNS[group_by]
    rows = [{**dict(zip(names, key, strict=True)), **_figures(members, gpu_types, currency)}
            for key, members in sorted(groups.items(), key=lambda item: str(item[0][-1]))]
    return rows, _figures(lines, gpu_types, currency)
