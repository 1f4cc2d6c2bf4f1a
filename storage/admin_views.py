"""The admin's storage classes (`/admin/storage-classes/`): which of the cluster's
StorageClasses the portal offers for volumes, described for researchers ("fast SSD"), whether
volumes of each may grow, and the default. Each is checked against the cluster when set. The
admin's datasets (`/admin/datasets/`): publish one, change it and who it is open to, withdraw
it."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from identity.access import SignedInRequest, admin_required
from kube.client import Kube, KubeError

from .forms import DatasetEditForm, DatasetForm
from .models import Dataset, StorageClass
from .services import (
    DatasetInUse,
    VolumeInvalid,
    dataset_create,
    dataset_delete,
    dataset_update,
    storage_class_set,
    storage_class_withdraw,
)
from .validation import DatasetInvalid
from .views import removed


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


def _errors_into(form: forms.Form, errors: dict[str, list[str]]) -> None:
    for field, messages_ in errors.items():
        for message in messages_:
            form.add_error(field if field in form.fields else None, message)


@admin_required
@require_http_methods(["GET", "POST"])
def datasets(request: SignedInRequest) -> HttpResponse:
    """Every dataset, who it is open to, and the form that publishes one."""
    form = DatasetForm(request.POST or None)
    status = 200
    if request.method == "POST":
        status = 400
        if form.is_valid():
            data = form.cleaned_data
            try:
                dataset = dataset_create(
                    user=request.user, name=data["name"], description=data["description"],
                    size_gib=data["size_gib"], kind=data["kind"], source=form.source(),
                    open_to_all=data["open_to_all"], tenants=list(data["projects"]))
            except DatasetInvalid as exc:
                _errors_into(form, exc.errors)
            except KubeError as exc:
                form.add_error(None, f"The cluster cannot be asked: {exc}")
                status = 503
            else:
                messages.success(request, f"Dataset {dataset.name} is published.")
                return redirect(reverse("storage:admin-datasets"))
    return render(request, "storage/admin_datasets.html", {
        "datasets": Dataset.objects.prefetch_related("tenants"), "form": form,
        "s3_driver": settings.PORTAL_S3_CSI_DRIVER}, status=status)


@admin_required
@require_http_methods(["GET", "POST"])
def dataset_edit(request: SignedInRequest, pk: int) -> HttpResponse:
    """One dataset: its name, description, size and who it is open to."""
    dataset = get_object_or_404(Dataset, pk=pk)
    form = DatasetEditForm(request.POST or None, initial={
        "name": dataset.name, "description": dataset.description,
        "size_gib": dataset.size_gib, "open_to_all": dataset.open_to_all,
        "projects": list(dataset.tenants.all())})
    status = 200
    if request.method == "POST":
        status = 400
        if form.is_valid():
            data = form.cleaned_data
            try:
                dataset_update(dataset=dataset, user=request.user, changes={
                    "name": data["name"], "description": data["description"],
                    "size_gib": data["size_gib"], "open_to_all": data["open_to_all"],
                    "tenants": list(data["projects"])})
            except DatasetInvalid as exc:
                _errors_into(form, exc.errors)
            except DatasetInUse as exc:
                form.add_error(None, str(exc))
                status = 409
            else:
                messages.success(request, f"Dataset {data['name']} is changed.")
                return redirect(reverse("storage:admin-datasets"))
    return render(request, "storage/admin_dataset.html", {"dataset": dataset, "form": form},
                  status=status)


@admin_required
@require_POST
def dataset_remove(request: SignedInRequest, pk: int) -> HttpResponse:
    dataset = get_object_or_404(Dataset, pk=pk)
    return removed(request, lambda: dataset_delete(dataset=dataset, user=request.user),
                   busy=DatasetInUse, back="storage:admin-datasets",
                   done=f"Dataset {dataset.name} is withdrawn.")
