"""What the billing tests share: a moment of November 2025 and a price sheet."""

from __future__ import annotations

import datetime as dt

PRICES = {"effective_from": "2025-01-01",
          "gpu": {"a100": "2.3456", "v100": "1.10", "t4-shared": "0.90"},
          "cpu_hour": "0.0125", "storage_gib_month": "0.05"}


def at(day: int, hour: int = 0, minute: int = 0, month: int = 11) -> dt.datetime:
    """A moment of 2025 in UTC (November unless `month` says otherwise)."""
    return dt.datetime(2025, month, day, hour, minute, tzinfo=dt.UTC)
