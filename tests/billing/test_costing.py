"""Pure: money rounded once, half up, exactly; a month cut where prices change; a shared
type's GPU-hours in GPU-equivalents."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from fractions import Fraction

from billing.costing import (
    GPU,
    Line,
    Who,
    line,
    money,
    report_rows,
    round_half_up,
    run_gpu_hours,
    segments,
)

UTC = dt.UTC
NOV = dt.datetime(2025, 11, 1, tzinfo=UTC)
DEC = dt.datetime(2025, 12, 1, tzinfo=UTC)


def test_a_half_cent_goes_up_where_a_float_goes_down():
    assert round(2.675, 2) == 2.67  # the float nearest 2.675 is below it
    assert money(Fraction(Decimal("2.675"))) == Decimal("2.68")
    assert money(Fraction(226) * Fraction(Decimal("0.0125"))) == Decimal("2.83")
    assert money(Fraction(1, 3)) == Decimal("0.33")
    assert money(Fraction(5, 1000)) == Decimal("0.01")
    assert round_half_up(Fraction(1, 3), 6) == Decimal("0.333333")


def test_a_quarter_of_a_gpu_for_an_hour_is_a_quarter_gpu_hour():
    assert run_gpu_hours(dt.timedelta(hours=1), 1, 1, 4) == Fraction(1, 4)
    assert run_gpu_hours(dt.timedelta(hours=48), 3, 1, 4) == 36
    assert run_gpu_hours(dt.timedelta(minutes=20), 1, 1, 1) == Fraction(1, 3)


def test_the_month_is_cut_where_a_sheet_takes_effect():
    old, new = object(), object()
    mid = dt.datetime(2025, 11, 20, tzinfo=UTC)
    assert segments(NOV, DEC, [(dt.datetime(2025, 1, 1, tzinfo=UTC), old), (mid, new)]) == [
        (NOV, mid, old), (mid, DEC, new)]
    assert segments(NOV, DEC, []) == [(NOV, DEC, None)]
    assert segments(NOV, DEC, [(mid, new)]) == [(NOV, mid, None), (mid, DEC, new)]
    assert segments(NOV, DEC, [(DEC, new)]) == [(NOV, DEC, None)]


def test_a_line_without_a_price_costs_nothing_and_a_group_adds_its_lines_costs():
    who = Who(tenant_id=1, tenant="vision-lab", department="CS")
    span = (NOV, DEC)
    lines: list[Line] = [line(who, GPU, "a100", Fraction(1, 3), Decimal("0.0150"), span),
                         line(who, GPU, "a100", Fraction(1, 3), Decimal("0.0150"), span),
                         line(who, GPU, "t4", Fraction(2), None, span)]
    assert [ln.cost for ln in lines] == [Decimal("0.01"), Decimal("0.01"), Decimal("0.00")]
    rows, totals = report_rows(lines, "department", "EUR")
    # each line rounded once (0.005 → 0.01), then added: not the rounding of their sum (0.01)
    assert rows[0]["cost"] == totals["cost"] == Decimal("0.02")
    assert rows[0]["gpu_hours_by_type"] == {"a100": Decimal("0.6667"), "t4": Decimal("2.0000")}
    assert rows[0]["department"] == "CS" and rows[0]["projects"] == 1
