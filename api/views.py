from __future__ import annotations

from typing import Protocol

from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect, JsonResponse
from django.urls import Resolver404, resolve
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from .authentication import APIRequest
from .errors import error_body
from .serializers import MeSerializer


class _Namespaced(Protocol):
    """The request's tenant (tenants/middleware.py, above this package): its namespace."""

    namespace: str


class MeView(APIView):
    """The caller's identity as the portal sees it."""

    @extend_schema(responses=MeSerializer)
    def get(self, request: APIRequest) -> Response:
        identity = request.identity
        tenant: _Namespaced | None = getattr(request, "tenant", None)
        data: dict[str, object] = {
            "user_id": identity.unscoped.user_id,
            "user_name": identity.unscoped.user_name,
            "domain": identity.unscoped.user_domain_name,
            "project": identity.project,
            "role": identity.role.label if identity.role else None,
            "is_admin": identity.is_admin,
            "namespace": tenant.namespace if tenant is not None else None,
            "token_expires_at": identity.expires_at,
        }
        return Response(MeSerializer(data).data)


@csrf_exempt
def not_found(request: HttpRequest, path: str = "") -> HttpResponse:
    """Any path under /api/ that no endpoint serves: 404 in the API's error format, with DEBUG
    on as well (no HTML page). A path that only lacks its trailing slash is redirected to it
    (301 for GET and HEAD, as Django's APPEND_SLASH does; 308 otherwise, so that the method and
    body are sent again)."""
    if not request.path.endswith("/"):
        try:
            match = resolve(request.path + "/")
        except Resolver404:
            match = None
        if match is not None and match.func is not not_found:
            target = request.path + "/"
            if request.META.get("QUERY_STRING"):
                target += "?" + request.META["QUERY_STRING"]
            response = HttpResponsePermanentRedirect(target)
            if request.method not in ("GET", "HEAD"):
                response.status_code = 308
            return response
    return JsonResponse(error_body("not_found", "No API endpoint at this path.", status=404),
                        status=404)
