"""OpenAPI descriptions of the portal's authentication schemes (drf-spectacular extensions)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from drf_spectacular.extensions import OpenApiAuthenticationExtension

if TYPE_CHECKING:
    from drf_spectacular.openapi import AutoSchema


class KeystoneTokenScheme(OpenApiAuthenticationExtension):
    target_class = "api.authentication.KeystoneTokenAuthentication"
    match_subclasses = True  # tenants.authentication.TenantTokenAuthentication, which DRF uses
    name = "keystoneToken"

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "X-Auth-Token",
            "description": "A Keystone token scoped to a project; the project is the tenant.",
        }


class WorkloadReportTokenScheme(OpenApiAuthenticationExtension):
    target_class = "workloads.api.views.WorkloadReportAuthentication"
    name = "workloadReportToken"

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer",
                "description": "A workload's SSH server's report token (from its pod's "
                               "Secret): POST /api/v1/ssh-sessions/ only."}


class PortalSessionScheme(OpenApiAuthenticationExtension):
    target_class = "api.authentication.PortalSessionAuthentication"
    name = "portalSession"

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, str]:
        return {"type": "apiKey", "in": "cookie", "name": "gpuportal_sessionid"}
