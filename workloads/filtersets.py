"""One filterset for workloads, used by the pages and the API."""

import django_filters

from .models import Workload


class WorkloadFilterSet(django_filters.FilterSet):
    state = django_filters.MultipleChoiceFilter(choices=Workload.State.choices)
    owner = django_filters.CharFilter(field_name="owner__username", lookup_expr="iexact")
    gpu_type = django_filters.CharFilter(field_name="gpu_type__slug")
    template = django_filters.CharFilter(field_name="template__slug")
    mine = django_filters.BooleanFilter(method="only_mine", label="Only mine")
    ordering = django_filters.OrderingFilter(
        fields=(("created_at", "created"), ("name", "name"), ("state", "state"),
                ("gpu_count", "gpus")))

    class Meta:
        model = Workload
        fields = ["state", "owner", "gpu_type", "template"]

    def only_mine(self, queryset, name, value):
        return queryset.filter(owner=self.request.user) if value and self.request else queryset
