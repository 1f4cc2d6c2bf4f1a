"""One filterset per model, used by the admin pages and the API alike."""

from __future__ import annotations

import django_filters
from django.db.models import Q, QuerySet

from .models import Tenant


class TenantFilterSet(django_filters.FilterSet):
    q = django_filters.CharFilter(method="search", label="Search")
    state = django_filters.ChoiceFilter(choices=Tenant.State.choices)
    ordering = django_filters.OrderingFilter(
        fields=(("name", "name"), ("state", "state"), ("namespace", "namespace"),
                ("quota__gpus_total", "gpus_total"), ("created_at", "created")),
    )

    class Meta:
        model = Tenant
        fields = ["state"]

    def search(self, queryset: QuerySet[Tenant], name: str, value: str) -> QuerySet[Tenant]:
        return queryset.filter(Q(name__icontains=value) | Q(namespace__icontains=value) |
                               Q(keystone_project_id__iexact=value))
