"""The tenant admin pages' forms that are not quota writes (those are quota_validation.py's)."""

from __future__ import annotations

from typing import Any

from django import forms

from catalogue.forms import AccessibleForm
from catalogue.images import validate_image_prefix
from catalogue.models import GpuType

from .models import Department, Tenant
from .quota_validation import MAX_VALUE

# a tenant's image registries and prefixes: at most this many
MAX_IMAGE_PREFIXES = 50


class ImagePrefixesForm(AccessibleForm):
    image_prefixes = forms.CharField(
        required=False, strip=False, label="Allowed image registries and prefixes",
        widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false",
                                     "placeholder": "nvcr.io/nvidia\nquay.io/jupyter"}),
        help_text="One per line, e.g. nvcr.io/nvidia or registry.example.org. Empty: any image.")

    def __init__(self, *args: Any, tenant: Tenant | None = None, **kwargs: Any) -> None:
        if tenant is not None:
            kwargs.setdefault("initial", {"image_prefixes": "\n".join(tenant.image_prefixes)})
        super().__init__(*args, **kwargs)

    def clean_image_prefixes(self) -> list[str]:
        prefixes: list[str] = []
        errors: list[str] = []
        for number, raw in enumerate(self.cleaned_data["image_prefixes"].splitlines(), start=1):
            line = raw.strip()
            if not line:
                continue
            try:
                prefix = validate_image_prefix(line)
            except ValueError as exc:
                errors.append(f"Line {number}: {exc}")
                continue
            if prefix not in prefixes:
                prefixes.append(prefix)
        if len(prefixes) > MAX_IMAGE_PREFIXES:
            errors.append(f"At most {MAX_IMAGE_PREFIXES} entries.")
        if errors:
            raise forms.ValidationError(errors)
        return prefixes


class DepartmentForm(AccessibleForm, forms.ModelForm):  # type: ignore[type-arg] # django-stubs
    """A department as the admin's page makes it (the API's serializer holds the same bounds)."""

    class Meta:
        model = Department
        fields = ["name", "description", "keystone_project_id", "gpu_cap"]
        labels = {"keystone_project_id": "Keystone project of its admins",
                  "gpu_cap": "GPU cap (GPU-equivalents)"}
        help_texts = {"keystone_project_id": "Its managers are the department's admins.",
                      "gpu_cap": "What its projects hold together; empty: no cap of its own."}

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # forms.ModelForm's
        """A cap per enabled GPU type (`cap_<slug>`; empty: none of its own), as the
        department has them."""
        self.gpu_types = list(GpuType.objects.filter(enabled=True))
        caps = kwargs["instance"].gpu_caps_by_type() if kwargs.get("instance") else {}
        super().__init__(*args, **kwargs)
        for gpu_type in self.gpu_types:
            self.fields[f"cap_{gpu_type.slug}"] = forms.IntegerField(
                required=False, min_value=0, max_value=MAX_VALUE, initial=caps.get(gpu_type.slug),
                label=f"{gpu_type.name} cap (GPUs)",
                help_text=f"{gpu_type.slug} GPUs its projects hold together; empty: no cap.")
            self.fields[f"cap_{gpu_type.slug}"].widget.attrs["aria-describedby"] = \
                f"hint-cap_{gpu_type.slug}"

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        cleaned["gpu_caps_by_type"] = {
            gpu_type.slug: cleaned[f"cap_{gpu_type.slug}"] for gpu_type in self.gpu_types
            if cleaned.get(f"cap_{gpu_type.slug}") is not None}
        return cleaned
