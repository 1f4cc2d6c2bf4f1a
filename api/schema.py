"""OpenAPI: the portal's authentication schemes (drf-spectacular extensions), and its error
answers (a postprocessing hook, SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"])."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension

from .errors import CATEGORIES

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


# the errors any operation may answer, by method, beyond those it documents itself: every one
# in the one shape of api/errors.py (a request's own input, its token and role, an unknown or
# hidden id, a page past the end, the rate limit, an outage); writes may also meet a conflict,
# a body too large or of the wrong type, an admission refusal (403) or a reused idempotency key
_READ_ERRORS = {"400": "invalid input", "401": "no token, or one Keystone refused",
                "403": "the role does not allow it", "404": "no such object (or not yours)",
                "429": "over the rate limit (Retry-After)",
                "503": "the database or the cluster is unavailable (Retry-After)"}
_WRITE_ERRORS = {**_READ_ERRORS, "409": "the object's state refuses it now",
                 "413": "the body is larger than the API accepts",
                 "415": "a body of a media type the API does not read",
                 "422": "an Idempotency-Key reused for another request"}


def error_responses(result: dict[str, Any], generator: Any, request: Any, public: bool
                    ) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: the Error schema ({code, category, detail,
    fields}), and the error answers of every operation (what its view documents stays)."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas["Error"] = {
        "type": "object", "required": ["code", "category", "detail", "fields"],
        "properties": {
            "code": {"type": "string", "description": "what happened, exactly (e.g. "
                                                      "quota_exceeded); new codes may appear"},
            "category": {"type": "string", "enum": CATEGORIES,
                         "description": "the kind of error, a fixed set: what a client "
                                        "decides on"},
            "detail": {"type": "string"},
            "fields": {"type": "object", "additionalProperties": {},
                       "description": "field → what is wrong with it"}}}
    error = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    for operations in result.get("paths", {}).values():
        for method, operation in operations.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            errors = _READ_ERRORS if method in ("get", "head") else _WRITE_ERRORS
            for status_code, description in errors.items():
                operation["responses"].setdefault(status_code,
                                                  {**error, "description": description})
            # an error the view documents by its description alone is in the one shape too
            for status_code, response in operation["responses"].items():
                if str(status_code).isdigit() and int(status_code) >= 400 and \
                        "content" not in response:
                    response.update(error)
    return result
