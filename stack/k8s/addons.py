"""The addons a real control plane of the portal runs (tests and `make demo CLUSTER=kube` alike)."""

from __future__ import annotations


def default_addons(*, keystone_url: str | None = None) -> list:
    return []
