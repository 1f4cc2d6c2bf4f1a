from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, status
from rest_framework.response import Response

from api.authentication import APIRequest
from api.viewsets import TenantScopedAPIView
from identity.scoping import Action
from tenants.models import Tenant

from ..models import Budget
from ..selectors import budget_status
from ..services import budget_delete, budget_set
from .serializers import BudgetSerializer, BudgetStatusSerializer


class BudgetView(TenantScopedAPIView[Tenant]):
    """A tenant's GPU-hour budget: its members, managers and readers read it (another
    tenant's: 404); admins set and remove it. Without a budget, GET answers `gpu_hours` null
    (no limit) with the month's use."""

    queryset = Tenant.objects.all()
    serializer_class = BudgetStatusSerializer  # type: ignore[assignment] # it reads a status
    request: APIRequest

    def _may_change(self, tenant: Tenant) -> None:
        if not Budget.objects.permits(self.request.identity, Action.CHANGE, Budget(tenant=tenant)):
            raise exceptions.PermissionDenied("Only portal administrators may change budgets.")

    def _answer(self, tenant: Tenant, code: int = status.HTTP_200_OK) -> Response:
        return Response(BudgetStatusSerializer(budget_status(tenant)).data, status=code)

    @extend_schema(responses=BudgetStatusSerializer)
    def get(self, request: APIRequest, pk: int) -> Response:
        return self._answer(self.get_object())

    @extend_schema(request=BudgetSerializer, responses=BudgetStatusSerializer)
    def put(self, request: APIRequest, pk: int) -> Response:
        tenant = self.get_object()  # another tenant's: 404
        self._may_change(tenant)
        serializer = BudgetSerializer(data=request.data, context={"tenant": tenant})
        serializer.is_valid(raise_exception=True)
        budget_set(tenant=tenant, acting_user=request.user, fields=serializer.validated_data)
        return self._answer(tenant)

    @extend_schema(request=None, responses={204: None})
    def delete(self, request: APIRequest, pk: int) -> Response:
        tenant = self.get_object()
        self._may_change(tenant)
        budget_delete(tenant=tenant, acting_user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)
