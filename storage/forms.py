"""The volumes page's forms and the admin's dataset forms: what a researcher or an admin types,
read into the services' arguments (the rules are the services': storage/services.py,
storage/validation.py)."""

from __future__ import annotations

from typing import Any

from django import forms

from core.validation import WholeNumberFormField
from tenants.models import Tenant

from .models import DATASET_NAME_MAX_LENGTH, NAME_MAX_LENGTH, Dataset, Volume
from .services import MAX_SIZE_GIB
from .validation import SOURCE_FIELDS

SOURCE_FIELD_NAMES = tuple(dict.fromkeys(f for fields in SOURCE_FIELDS.values() for f in fields))


class VolumeForm(forms.Form):
    name = forms.CharField(max_length=NAME_MAX_LENGTH)
    size_gib = WholeNumberFormField(min_value=1, max_value=MAX_SIZE_GIB, label="Size (GiB)")
    scope = forms.ChoiceField(choices=Volume.Scope.choices, initial=Volume.Scope.USER,
                              label="Whose")
    storage_class = forms.ChoiceField(required=False, label="Storage class")

    def __init__(self, *args: object, classes: list[tuple[str, str]], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        field = self.fields["storage_class"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [("", "the default"), *classes]


class GrowForm(forms.Form):
    size_gib = WholeNumberFormField(min_value=1, max_value=MAX_SIZE_GIB, label="New size (GiB)")


class DatasetForm(forms.Form):
    """The admin's dataset form: every kind's source fields, of which only the kind's are
    filled (storage/validation.py refuses another kind's)."""

    name = forms.CharField(max_length=DATASET_NAME_MAX_LENGTH,
                           help_text="lower-case letters, digits and '-'")
    description = forms.CharField(max_length=500, required=False)
    kind = forms.ChoiceField(choices=Dataset.Kind.choices)
    size_gib = WholeNumberFormField(min_value=1, max_value=MAX_SIZE_GIB, label="Size (GiB)")
    persistent_volume = forms.CharField(max_length=253, required=False,
                                        label="PersistentVolume (pv)")
    server = forms.CharField(max_length=253, required=False, label="Server (nfs)")
    path = forms.CharField(max_length=1024, required=False, label="Export path (nfs)")
    driver = forms.CharField(max_length=63, required=False, label="Driver (csi)")
    volume_handle = forms.CharField(max_length=1024, required=False,
                                    label="Volume handle (csi)")
    volume_attributes = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}),
                                        max_length=8000,
                                        label="Volume attributes (csi), one name=value a line")
    endpoint = forms.CharField(max_length=253, required=False, label="Endpoint URL (s3)")
    bucket = forms.CharField(max_length=63, required=False, label="Bucket (s3)")
    # not `prefix`: a form's own attribute
    key_prefix = forms.CharField(max_length=1024, required=False, label="Prefix (s3)")
    region = forms.CharField(max_length=32, required=False, label="Region (s3)")
    open_to_all = forms.BooleanField(required=False, label="Open to every project")
    projects = forms.ModelMultipleChoiceField(queryset=Tenant.objects.order_by("name"),
                                              required=False, label="Or to these projects")

    def clean_volume_attributes(self) -> dict[str, str]:
        lines = [line.strip() for line in self.cleaned_data["volume_attributes"].splitlines()]
        pairs = [line.partition("=") for line in lines if line]
        if any(not sep or not key.strip() for key, sep, _ in pairs):
            raise forms.ValidationError("One name=value a line.")
        return {key.strip(): value.strip() for key, _, value in pairs}

    def source(self) -> dict[str, Any]:
        """The source fields as the service takes them (empty ones left out)."""
        data = {**self.cleaned_data, "prefix": self.cleaned_data.get("key_prefix")}
        return {field: data[field] for field in SOURCE_FIELD_NAMES if data.get(field)}


class DatasetEditForm(forms.Form):
    name = forms.CharField(max_length=DATASET_NAME_MAX_LENGTH)
    description = forms.CharField(max_length=500, required=False)
    size_gib = WholeNumberFormField(min_value=1, max_value=MAX_SIZE_GIB, label="Size (GiB)")
    open_to_all = forms.BooleanField(required=False, label="Open to every project")
    projects = forms.ModelMultipleChoiceField(queryset=Tenant.objects.order_by("name"),
                                              required=False, label="Or to these projects")
