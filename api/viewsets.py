"""The API's base views for tenant-owned objects: the tenant restriction is theirs, for every
method, so that no endpoint can forget it.

`get_queryset()` is the view's queryset restricted to what the caller may see
(`restrict(identity, "view")`, identity/scoping.py): lists show only the caller's
tenant and another tenant's object is a 404, never a 403. `get_object()` then asks whether the
caller may do what the request does (`change_actions`: a viewset's action names, or a plain
view's HTTP methods, in lower case): a row of their own tenant that their role may not change
is a 403.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, TypeVar

from django.db.models import Model, QuerySet
from rest_framework import exceptions, generics, viewsets

from identity.scoping import Action, tenant_scoped

from .authentication import APIRequest

_M = TypeVar("_M", bound=Model)

# an object's id in a router's URL: ASCII digits. `\d` also matches other scripts' digits, and
# the database reads "\u0661" as 1: the same object would answer at a second address
ID_PATTERN = "[0-9]+"

# a mixin of GenericAPIView's subclasses: the checker sees the base whose methods it extends;
# at run time it is a plain mixin, generic in the view's model
if TYPE_CHECKING:
    ViewMixin = generics.GenericAPIView
else:
    ViewMixin = Generic


class TenantScoped(ViewMixin[_M]):
    request: APIRequest
    change_actions: frozenset[str] = frozenset()
    refusal = "Your role in this project may not change this."

    def scope_action(self) -> Action:
        name = getattr(self, "action", None) or (self.request.method or "").lower()
        return Action.CHANGE if name in self.change_actions else Action.VIEW

    def get_queryset(self) -> QuerySet[_M]:
        queryset = tenant_scoped(super().get_queryset())
        if getattr(self, "swagger_fake_view", False):  # the schema generator: no request
            return queryset.none()
        return queryset.restrict(self.request.identity, Action.VIEW)

    def get_object(self) -> _M:
        obj = super().get_object()
        action = self.scope_action()
        if action is not Action.VIEW and not tenant_scoped(type(obj)._default_manager.all()).permits(
                self.request.identity, action, obj):
            raise exceptions.PermissionDenied(self.refusal)
        return obj


class TenantScopedViewSet(TenantScoped[_M], viewsets.GenericViewSet[_M]):
    lookup_value_regex = ID_PATTERN


class TenantScopedAPIView(TenantScoped[_M], generics.GenericAPIView[_M]):
    pass
