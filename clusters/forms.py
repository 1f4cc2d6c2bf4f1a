"""The admin's cluster form: plain fields, checked by the service (cluster_fields_clean)."""

from __future__ import annotations

from typing import Any

from django import forms

from .models import Cluster


class ClusterForm(forms.Form):
    name = forms.CharField(max_length=40, help_text="Lower-case letters, digits and '-': it "
                                                    "names the cluster for good.")
    display_name = forms.CharField(max_length=100, required=False)
    kubeconfig_path = forms.CharField(
        max_length=500, required=False, label="Kubeconfig file",
        help_text="An absolute path that the portal's processes can read.")
    kubeconfig_secret = forms.CharField(
        max_length=253, required=False, label="Or a Secret holding it",
        help_text="namespace/name of a Secret of the home cluster, key kubeconfig.")
    gpu_types = forms.CharField(
        max_length=1000, required=False, label="GPU types offered",
        help_text="Slugs separated by spaces or commas; empty: whatever its nodes carry.")
    enabled = forms.BooleanField(required=False, initial=True)

    def __init__(self, *args: Any, cluster: Cluster | None = None, **kwargs: Any) -> None:
        if cluster is not None:
            kwargs.setdefault("initial", {
                "name": cluster.name, "display_name": cluster.display_name,
                "kubeconfig_path": cluster.kubeconfig_path,
                "kubeconfig_secret": cluster.kubeconfig_secret,
                "gpu_types": " ".join(cluster.gpu_types), "enabled": cluster.enabled})
        super().__init__(*args, **kwargs)
        self.cluster = cluster
        if cluster is not None:
            self.fields["name"].disabled = True
            if cluster.home:
                for field in ("kubeconfig_path", "kubeconfig_secret", "enabled"):
                    self.fields[field].disabled = True

    def fields_given(self) -> dict[str, Any]:
        """The service's fields, from the cleaned data."""
        data = dict(self.cleaned_data)
        data["gpu_types"] = [slug for slug in data["gpu_types"].replace(",", " ").split()]
        if self.cluster is not None:
            data.pop("name")
            if self.cluster.home:
                for field in ("kubeconfig_path", "kubeconfig_secret", "enabled"):
                    data.pop(field)
        return data
