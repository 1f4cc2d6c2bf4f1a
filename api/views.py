from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from tenants.models import Tenant

from .serializers import MeSerializer


class MeView(APIView):
    """The caller's identity as the portal sees it."""

    @extend_schema(responses=MeSerializer)
    def get(self, request):
        identity = request.identity
        project = identity.project
        namespace = None
        if project is not None:
            namespace = (Tenant.objects.filter(keystone_project_id=project.id)
                         .values_list("namespace", flat=True).first())
        data = {
            "user_id": identity.unscoped.user_id,
            "user_name": identity.unscoped.user_name,
            "domain": identity.unscoped.user_domain_name,
            "project": project,
            "role": identity.role.label if identity.role else None,
            "is_admin": identity.is_admin,
            "namespace": namespace,
            "token_expires_at": identity.expires_at,
        }
        return Response(MeSerializer(data).data)
