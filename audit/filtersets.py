"""One filterset per model, used by the admin page and the API alike."""

import django_filters
from django.db.models import Q, QuerySet

from core.validation import MomentFormField

from .models import AuditRecord


class MomentFilter(django_filters.Filter):
    field_class = MomentFormField


class AuditRecordFilterSet(django_filters.FilterSet):
    tenant = django_filters.NumberFilter(field_name="tenant_id")
    user = django_filters.CharFilter(method="by_user", label="User (Keystone user id, or name)")
    action = django_filters.CharFilter(field_name="action", lookup_expr="istartswith")
    # ISO 8601 within core.validation's range (a year-1 time is refused here, not by the
    # database)
    since = MomentFilter(field_name="at", lookup_expr="gte")
    until = MomentFilter(field_name="at", lookup_expr="lt")

    class Meta:
        model = AuditRecord
        fields = ["tenant", "user", "action"]

    def by_user(self, queryset: QuerySet[AuditRecord], name: str, value: str,
                ) -> QuerySet[AuditRecord]:
        """The records of the user with this Keystone user id, or of anyone shown by this name
        (each record shows its actor's domain where it is not the default)."""
        return queryset.filter(Q(actor_user_id=value) | Q(actor_name__iexact=value))
