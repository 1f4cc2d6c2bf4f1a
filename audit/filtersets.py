"""One filterset per model, used by the admin page and the API alike."""

import django_filters

from core.validation import MomentFormField

from .models import AuditRecord


class MomentFilter(django_filters.Filter):
    field_class = MomentFormField


class AuditRecordFilterSet(django_filters.FilterSet):
    tenant = django_filters.NumberFilter(field_name="tenant_id")
    user = django_filters.CharFilter(field_name="actor_name", lookup_expr="iexact")
    action = django_filters.CharFilter(field_name="action", lookup_expr="istartswith")
    # ISO 8601 within core.validation's range (a year-1 time is refused here, not by the
    # database)
    since = MomentFilter(field_name="at", lookup_expr="gte")
    until = MomentFilter(field_name="at", lookup_expr="lt")

    class Meta:
        model = AuditRecord
        fields = ["tenant", "user", "action"]
