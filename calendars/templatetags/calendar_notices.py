"""The maintenance banner, for pages rendered by apps below this one (the launch page is
workloads', the dashboard portal's): `{% load calendar_notices %}{% maintenance_banner tenant %}`
shows the announced windows of the next 7 days on the GPU types the tenant has quota for."""

from __future__ import annotations

from typing import Any

from django import template

from ..capacity_plan import maintenance_notices

register = template.Library()


@register.inclusion_tag("calendars/_maintenance_banner.html")
def maintenance_banner(tenant: Any) -> dict[str, Any]:
    return {"notices": maintenance_notices(tenant)}
