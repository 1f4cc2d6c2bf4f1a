"""Times and sizes as the pages show them: right without JavaScript, in the reader's own
locale and time zone with it.

`{% moment value %}` renders `<time datetime="…" data-format="…">` whose text is the server's
rendering (in settings.TIME_ZONE, named); static/js/portal.js rewrites it with Intl in the
browser's locale and time zone. `{{ value|gib }}` renders a size in GiB as `<data>` that the
same script formats with the browser's number format.
"""

from __future__ import annotations

import datetime
from decimal import Decimal

from django import template
from django.template.defaultfilters import date as date_filter
from django.utils import formats, timezone
from django.utils.html import format_html

register = template.Library()

# data-format → the server's fallback rendering (Django date format)
FALLBACK = {"datetime": "Y-m-d H:i:s T", "date": "Y-m-d", "time": "H:i:s T",
            "minutes": "Y-m-d H:i T"}


@register.simple_tag
def moment(value: datetime.datetime | None, style: str = "datetime", empty: str = "—") -> str:
    """A point in time; `style` one of datetime, date, time, minutes."""
    if value is None:
        return empty
    local = timezone.localtime(value) if timezone.is_aware(value) else value
    return format_html('<time datetime="{}" data-format="{}">{}</time>',
                       value.isoformat(), style, date_filter(local, FALLBACK[style]))


@register.filter
def gib(value: float | Decimal | str | None) -> str:
    """A size in GiB, e.g. memory."""
    if value is None or value == "":
        return "—"
    text = formats.number_format(value, use_l10n=True, force_grouping=True)
    return format_html('<data value="{}" data-unit="GiB">{} GiB</data>', value, text)


@register.filter
def hours(value: float | Decimal | str | None) -> str:
    """GPU-hours: two decimals, or four when two would show a small amount as zero."""
    if value is None:
        return "—"
    places = 4 if 0 < abs(float(value)) < 0.01 else 2
    return formats.number_format(float(value), places)
