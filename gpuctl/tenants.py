"""Which tenant a command means: `--tenant` / `--project` as a tenant id, a name or a Keystone
project id, or without one the project of the token."""

from __future__ import annotations

from typing import Any

from .client import ApiError, PortalClient


def find_tenant(api: PortalClient, wanted: str | None) -> dict[str, Any]:
    if wanted:
        if wanted.isascii() and wanted.isdigit():
            found: dict[str, Any] = api.get(f"tenants/{wanted}/")
            return found
        for tenant in api.get_all("tenants/", q=wanted):
            if wanted in (tenant["name"], tenant["keystone_project_id"]):
                return tenant
        raise ApiError(404, "not_found", f"No tenant named {wanted!r} that you can see.")
    project = api.get("me/").get("project")
    if not project:
        raise ApiError(404, "not_found", "Your token has no project; pass --tenant.")
    for tenant in api.get_all("tenants/", q=project["id"]):
        if tenant["keystone_project_id"] == project["id"]:
            return tenant
    raise ApiError(404, "not_found", f"No tenant for project {project['name']}.")
