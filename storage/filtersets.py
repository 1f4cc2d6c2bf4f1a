"""One filterset for volumes, used by the page and the API."""

import django_filters

from .models import Volume


class VolumeFilterSet(django_filters.FilterSet):
    scope = django_filters.ChoiceFilter(choices=Volume.Scope.choices)
    state = django_filters.MultipleChoiceFilter(choices=Volume.State.choices)
    storage_class = django_filters.CharFilter()
    name = django_filters.CharFilter(lookup_expr="icontains")

    class Meta:
        model = Volume
        fields = ["scope", "state", "storage_class", "name"]
