"""The admin's storage classes (`/admin/storage-classes/`): which of the cluster's
StorageClasses the portal offers for volumes, described for researchers ("fast SSD"), whether
volumes of each may grow, and the default. Each is checked against the cluster when set."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from identity.access import SignedInRequest, admin_required
from kube.client import Kube, KubeError

from .models import StorageClass
from .services import VolumeInvalid, storage_class_set, storage_class_withdraw


def _cluster_classes() -> tuple[list[dict[str, object]], str]:
    """The cluster's StorageClasses (name, provisioner, expandable), or why they are unknown."""
    try:
        items = Kube().list("StorageClass")["items"]
    except KubeError as exc:
        return [], f"The cluster's storage classes cannot be read: {exc}"
    return [{"name": c["metadata"]["name"], "provisioner": c.get("provisioner", ""),
             "expandable": bool(c.get("allowVolumeExpansion"))} for c in items], ""


@admin_required
@require_http_methods(["GET", "POST"])
def storage_classes(request: SignedInRequest) -> HttpResponse:
    errors: dict[str, list[str]] = {}
    status = 200
    if request.method == "POST":
        name = request.POST.get("name", "").strip()[:253]
        if request.POST.get("withdraw"):
            offered = StorageClass.objects.filter(name=name).first()
            if offered is not None:
                storage_class_withdraw(user=request.user, offered=offered)
                messages.success(request, f"{name} is no longer offered.")
            return redirect(reverse("storage:admin-classes"))
        try:
            storage_class_set(user=request.user, name=name,
                              description=request.POST.get("description", "").strip()[:200],
                              expandable=bool(request.POST.get("expandable")),
                              is_default=bool(request.POST.get("is_default")))
        except VolumeInvalid as exc:
            errors, status = exc.errors, 400
        except KubeError as exc:
            errors, status = {"name": [f"The cluster cannot be asked: {exc}"]}, 503
        else:
            messages.success(request, f"{name} is offered for volumes.")
            return redirect(reverse("storage:admin-classes"))
    cluster, cluster_error = _cluster_classes()
    return render(request, "storage/admin_classes.html", {
        "offered": StorageClass.objects.all(), "cluster": cluster,
        "cluster_error": cluster_error, "errors": errors, "values": request.POST},
        status=status)
