"""One filterset for workloads, used by the pages and the API."""

import django_filters
from django import forms
from django.contrib.auth import get_user_model
from django.db.models import QuerySet

from identity.models import User
from identity.selectors import UserAmbiguous, UserRefused, user_resolve

from .models import Workload

NOBODY = object()  # an owner filter that names no owner here: no rows


class WorkloadFilterSet(django_filters.FilterSet):
    state = django_filters.MultipleChoiceFilter(choices=Workload.State.choices)
    owner = django_filters.CharFilter(method="by_owner",
                                      label="Owner (Keystone user id, or name)")
    gpu_type = django_filters.CharFilter(field_name="gpu_type__slug")
    template = django_filters.CharFilter(field_name="template__slug")
    mine = django_filters.BooleanFilter(method="only_mine", label="Only mine")
    ordering = django_filters.OrderingFilter(
        fields=(("created_at", "created"), ("name", "name"), ("state", "state"),
                ("gpu_count", "gpus")))

    class Meta:
        model = Workload
        fields = ["state", "owner", "gpu_type", "template"]

    def get_form_class(self) -> type[forms.Form]:
        """The form, whose `owner` is read as the one owner (of the workloads filtered) that
        it means: a Keystone user id, or a name only one of them has; a name several share is
        the field's error (the API's 400), naming each."""
        owners = get_user_model().objects.filter(pk__in=self.queryset.values("owner"))

        class Form(super().get_form_class()):  # type: ignore[misc]
            def clean_owner(self) -> object:
                value = self.cleaned_data.get("owner")
                if not value:
                    return value
                try:
                    return user_resolve(value, among=owners, where="among the owners here")
                except UserAmbiguous as exc:
                    raise forms.ValidationError(str(exc)) from exc
                except UserRefused:
                    return NOBODY

        return Form

    def by_owner(self, queryset: QuerySet[Workload], name: str, value: object
                 ) -> QuerySet[Workload]:
        # what the form's clean_owner read: the one owner named, or NOBODY
        return queryset.filter(owner=value) if isinstance(value, User) else queryset.none()

    def only_mine(self, queryset: QuerySet[Workload], name: str, value: bool | None
                  ) -> QuerySet[Workload]:
        return queryset.filter(owner=self.request.user) if value and self.request else queryset
