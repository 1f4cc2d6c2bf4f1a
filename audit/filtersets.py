"""One filterset per model, used by the admin page and the API alike."""

import django_filters

from .models import AuditRecord


class AuditRecordFilterSet(django_filters.FilterSet):
    tenant = django_filters.NumberFilter(field_name="tenant_id")
    user = django_filters.CharFilter(field_name="actor_name", lookup_expr="iexact")
    action = django_filters.CharFilter(field_name="action", lookup_expr="istartswith")
    since = django_filters.IsoDateTimeFilter(field_name="at", lookup_expr="gte")
    until = django_filters.IsoDateTimeFilter(field_name="at", lookup_expr="lt")

    class Meta:
        model = AuditRecord
        fields = ["tenant", "user", "action"]
