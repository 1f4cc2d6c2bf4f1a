"""API errors as the real Kubernetes API server reports them: `Status` objects.

Every failure kubesim answers with is an `ApiError`; the HTTP layer turns it into the JSON
body from `ApiError.status()` and the HTTP code from `ApiError.code`. Messages and details
follow the real server's, because clients parse them: the official
client raises `ApiException` with the body, kubectl prints `Error from server (Reason): msg`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubesim.resources import ResourceType


class ApiError(Exception):
    """A failure to be answered with a `Status` body."""

    def __init__(
        self, code: int, reason: str, message: str, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.list_meta: dict[str, Any] = {}  # Status.metadata (a 410's fresh continue token)

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": dict(self.list_meta),
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        }
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body

    def __repr__(self) -> str:
        return f"ApiError({self.code}, {self.reason!r}, {self.message!r})"


def _details(rt: ResourceType, name: str) -> dict[str, Any]:
    # The real server names the plural resource in details.kind and leaves out an empty group.
    details: dict[str, Any] = {"name": name}
    if rt.group:
        details["group"] = rt.group
    details["kind"] = rt.plural
    return details


def not_found(rt: ResourceType, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{rt.qualified} "{name}" not found', _details(rt, name))


def already_exists(rt: ResourceType, name: str) -> ApiError:
    return ApiError(
        409, "AlreadyExists", f'{rt.qualified} "{name}" already exists', _details(rt, name)
    )


def conflict(rt: ResourceType, name: str) -> ApiError:
    message = (
        f'Operation cannot be fulfilled on {rt.qualified} "{name}": the object has been '
        "modified; please apply your changes to the latest version and try again"
    )
    return ApiError(409, "Conflict", message, _details(rt, name))


def conflict_message(rt: ResourceType, name: str, why: str) -> ApiError:
    """A 409 Conflict with another explanation (e.g. a UID precondition)."""
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {rt.qualified} "{name}": {why}',
        _details(rt, name),
    )


def precondition_failed(rt: ResourceType, name: str, why: str) -> ApiError:
    """409 for a delete whose preconditions do not hold. The real server checks them early
    (rest.BeforeDelete) and names the Kind there, not the resource: `Operation cannot be
    fulfilled on ConfigMap "a": the UID in the precondition (…) does not match …`."""
    details: dict[str, Any] = {"name": name}
    if rt.group:
        details["group"] = rt.group
    details["kind"] = rt.kind
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {rt.kind} "{name}": {why}',
                    details)


def cause(reason: str, message: str, field: str) -> dict[str, str]:
    """One entry of details.causes, e.g. cause("FieldValueRequired", "Required value", "spec")."""
    return {"reason": reason, "message": message, "field": field}


def invalid(kind: str, name: str, causes: list[dict[str, Any]], *, group: str = "") -> ApiError:
    """422 Invalid: `Pod "x" is invalid: spec.containers: Required value`.

    Unlike the other errors, details.kind is the Kind; the message names it with its group
    (`Deployment.apps "web" is invalid: …`).
    """
    qualified = f"{kind}.{group}" if group else kind
    parts = [f"{c['field']}: {c['message']}" if c.get("field") else c["message"] for c in causes]
    summary = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    details: dict[str, Any] = {"name": name} if name else {}  # an empty name is left out
    if group:
        details["group"] = group
    details["kind"] = kind
    details["causes"] = causes
    return ApiError(422, "Invalid", f'{qualified} "{name}" is invalid: {summary}', details)


def forbidden(rt: ResourceType, name: str, message: str) -> ApiError:
    return ApiError(
        403, "Forbidden", f'{rt.qualified} "{name}" is forbidden: {message}', _details(rt, name)
    )


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def path_not_found() -> ApiError:
    """What the real server answers for a path or resource it does not serve."""
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def method_not_allowed() -> ApiError:
    return ApiError(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
        {},
    )


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def too_large(limit: int) -> ApiError:
    return ApiError(413, "RequestEntityTooLarge", f"request entity too large: limit is {limit}")


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf (got {content_type})",
    )


def timeout(message: str, retry_after: int = 1) -> ApiError:
    return ApiError(504, "Timeout", message, {"retryAfterSeconds": retry_after})


def internal(message: str) -> ApiError:
    return ApiError(
        500,
        "InternalError",
        f"Internal error occurred: {message}",
        {"causes": [{"message": message}]},
    )


def invalid_list_options(causes: list[dict[str, Any]]) -> ApiError:
    """422 for bad list options (kind ListOptions, group meta.k8s.io), as the real API server answers."""
    parts = [f"{c['field']}: {c['message']}" if c.get("field") else c["message"] for c in causes]
    summary = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    details = {"group": "meta.k8s.io", "kind": "ListOptions", "causes": causes}
    return ApiError(422, "Invalid", f'ListOptions.meta.k8s.io "" is invalid: {summary}', details)
