"""The volumes page's forms: what a researcher types, read into the services' arguments (the
rules are the services': storage/services.py)."""

from __future__ import annotations

from django import forms

from .models import NAME_MAX_LENGTH, Volume
from .services import MAX_SIZE_GIB


class VolumeForm(forms.Form):
    name = forms.CharField(max_length=NAME_MAX_LENGTH)
    size_gib = forms.IntegerField(min_value=1, max_value=MAX_SIZE_GIB, label="Size (GiB)")
    scope = forms.ChoiceField(choices=Volume.Scope.choices, initial=Volume.Scope.USER,
                              label="Whose")
    storage_class = forms.ChoiceField(required=False, label="Storage class")

    def __init__(self, *args: object, classes: list[tuple[str, str]], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        field = self.fields["storage_class"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [("", "the default"), *classes]


class GrowForm(forms.Form):
    size_gib = forms.IntegerField(min_value=1, max_value=MAX_SIZE_GIB, label="New size (GiB)")
