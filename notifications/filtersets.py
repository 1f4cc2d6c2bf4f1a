"""One filterset per model, used by the notifications page and the API alike."""

import django_filters

from .models import Kind, Notification


class NotificationFilterSet(django_filters.FilterSet):
    unread = django_filters.BooleanFilter(field_name="read_at", lookup_expr="isnull",
                                          label="unread only")
    kind = django_filters.ChoiceFilter(choices=Kind.choices)

    class Meta:
        model = Notification
        fields = ["unread", "kind"]
