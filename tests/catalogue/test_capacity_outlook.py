"""The capacity outlook (catalogue/selectors.py): the capacity view's free GPUs now, less what
every entry of its hook (catalogue/hooks.py) takes out of the pool in the next hours, together;
the reason at each change is that of the first entry, in the hook's order, to start or end then.
"""

from __future__ import annotations

import datetime as dt

from catalogue.hooks import CAPACITY_OUTLOOKS, Taken
from catalogue.models import GpuType
from catalogue.selectors import capacity_outlook

NOW = dt.datetime(2026, 11, 20, 12, 0, tzinfo=dt.UTC)
HOUR = dt.timedelta(hours=1)
A100 = GpuType(slug="a100", resource_name="nvidia.com/gpu")


def maintenance(gpu_type, *, tenant, since, until, reads):
    return [Taken(NOW + HOUR, NOW + 3 * HOUR, 4, "maintenance", "maintenance ends")]


def reservations(gpu_type, *, tenant, since, until, reads):
    mine = tenant == "vision-lab"
    return [Taken(NOW + 2 * HOUR, NOW + 4 * HOUR, 2, "reserved", "reservation ends"),
            *([] if mine else [Taken(NOW + 3 * HOUR, NOW + 5 * HOUR, 1, "reserved",
                                     "reservation ends")])]


def changes(outlook):
    return [(c["at"] - NOW, c["free"], c["why"]) for c in outlook["changes"]]


def test_every_entry_takes_its_part_out_together():
    with CAPACITY_OUTLOOKS.replaced({"maintenance": maintenance, "reservations": reservations},
                                    order=("maintenance", "reservations")):
        outlook = capacity_outlook(A100, now=NOW, free_now=8)
        assert changes(outlook) == [(HOUR, 4, "maintenance"),
                                    (2 * HOUR, 2, "reserved"),
                                    # 3 h: the window ends as another reservation starts
                                    (3 * HOUR, 5, "maintenance ends"),
                                    (4 * HOUR, 7, "reservation ends"),
                                    (5 * HOUR, 8, "reservation ends")]
        assert outlook["free_now"] == 8
        assert outlook["text"] == ("8 a100 free now, 4 from 13:00 (maintenance), 2 from 14:00 "
                                   "(reserved), 5 from 15:00 (maintenance ends), 7 from 16:00 "
                                   "(reservation ends), 8 from 17:00 (reservation ends)")
        # the entries see who asks
        assert changes(capacity_outlook(A100, tenant="vision-lab", now=NOW, free_now=8))[-1] \
            == (4 * HOUR, 8, "reservation ends")


def test_one_entry_alone_and_none_at_all():
    with CAPACITY_OUTLOOKS.replaced({"reservations": reservations}, order=("reservations",)):
        assert changes(capacity_outlook(A100, now=NOW, free_now=8)) == [
            (2 * HOUR, 6, "reserved"), (3 * HOUR, 5, "reserved"),
            (4 * HOUR, 7, "reservation ends"), (5 * HOUR, 8, "reservation ends")]
    with CAPACITY_OUTLOOKS.replaced({}):
        assert capacity_outlook(A100, now=NOW, free_now=8) is None
