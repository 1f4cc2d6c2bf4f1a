"""The cluster-unreachable banner: on every page, from one cache read (kube.status)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from .status import cluster_outage


def cluster_status(request: HttpRequest) -> dict[str, Any]:
    """`cluster_unreachable`: the recorded outage (error, since) for signed-in users, or None."""
    if not getattr(request, "identity", None):
        return {"cluster_unreachable": None}  # the login page does not need the cluster
    return {"cluster_unreachable": cluster_outage()}
