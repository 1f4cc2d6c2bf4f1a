"""The admins' GPU health banner: unhealthy GPUs on every page an admin opens."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from .health import unhealthy_devices

SHOWN = 10


def gpu_alerts(request: HttpRequest) -> dict[str, Any]:
    """For portal admins only (one indexed query): the GPUs marked degraded or lost."""
    identity = getattr(request, "identity", None)
    if identity is None or not identity.is_admin:
        return {}
    devices = list(unhealthy_devices().order_by("node", "index")[:SHOWN + 1])
    return {"gpu_alerts": devices[:SHOWN], "gpu_alerts_more": len(devices) > SHOWN}
