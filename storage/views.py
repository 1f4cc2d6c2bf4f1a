"""The volumes page (`/volumes/`, every role of the current project): the volumes the caller
sees with their state and the provisioner's reason; a member makes their own, a manager the
project's; those who may change a volume grow or delete it there. The datasets page
(`/datasets/`): the read-only datasets open to the project."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from identity.access import project_required, scoped_object, tenant_required
from identity.scoping import Action
from tenants.middleware import TenantRequest
from tenants.models import Tenant

from .filtersets import VolumeFilterSet
from .forms import GrowForm, VolumeForm
from .models import Volume
from .selectors import (
    datasets_open_to,
    storage_classes_offered,
    storage_used,
    volumes_visible,
)
from .services import (
    StorageQuotaExceeded,
    VolumeInUse,
    VolumeInvalid,
    volume_create,
    volume_delete,
    volume_grow,
)


def _classes() -> list[tuple[str, str]]:
    return [(c.name, f"{c.name} — {c.description}" if c.description else c.name)
            for c in storage_classes_offered()]


def _page(request: TenantRequest, form: VolumeForm, *, status: int = 200,
          refused: str = "") -> HttpResponse:
    identity, tenant = request.identity, request.tenant
    assert tenant is not None  # tenant_required
    rows = VolumeFilterSet(request.GET, queryset=volumes_visible(identity).filter(
        tenant=tenant)).qs
    changeable = set(Volume.objects.restrict(identity, Action.CHANGE).filter(tenant=tenant)
                     .values_list("pk", flat=True))
    quota = tenant.quota
    used_gib, used_volumes = storage_used(tenant)
    return render(request, "storage/volumes.html", {
        "tenant": tenant, "volumes": rows, "changeable": changeable, "form": form,
        "may_make": Tenant.objects.permits(identity, Action.LAUNCH, tenant),
        "may_make_project": Tenant.objects.permits(identity, Action.CHANGE, tenant),
        "classes": storage_classes_offered(), "refused": refused,
        "used_gib": used_gib, "used_volumes": used_volumes,
        "quota_gib": quota.storage_gib, "quota_volumes": quota.volumes}, status=status)


@project_required
@require_GET
@tenant_required(Action.VIEW)
def volumes_page(request: TenantRequest) -> HttpResponse:
    return _page(request, VolumeForm(classes=_classes()))


@project_required
@require_POST
@tenant_required(Action.LAUNCH)
def create(request: TenantRequest) -> HttpResponse:
    """Make a volume; refused: the page again with the reason (400 invalid, 403 the project's
    volumes are its managers' or the quota has no room)."""
    tenant = request.tenant
    assert tenant is not None
    form = VolumeForm(request.POST, classes=_classes())
    if not form.is_valid():
        return _page(request, form, status=400)
    data = form.cleaned_data
    if data["scope"] == Volume.Scope.PROJECT and not Tenant.objects.permits(
            request.identity, Action.CHANGE, tenant):
        return _page(request, form, status=403,
                     refused="Only the project's managers make project volumes.")
    try:
        volume = volume_create(tenant=tenant, user=request.user, name=data["name"],
                               size_gib=data["size_gib"], scope=data["scope"],
                               storage_class=data["storage_class"] or None)
    except VolumeInvalid as exc:
        for field, errors in exc.errors.items():
            for error in errors:
                form.add_error(field if field in form.fields else None, error)
        return _page(request, form, status=400)
    except StorageQuotaExceeded as exc:
        return _page(request, form, status=403, refused=str(exc))
    messages.success(request, f"Volume {volume.name} is being made ({volume.size_gib} GiB).")
    return redirect(reverse("storage:volumes"))


@project_required
@require_POST
@scoped_object(Volume, Action.CHANGE)
def grow(request: TenantRequest, volume: Volume) -> HttpResponse:
    form = GrowForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Give the new size in whole GiB.")
        return redirect(reverse("storage:volumes"))
    try:
        volume_grow(volume=volume, user=request.user, size_gib=form.cleaned_data["size_gib"])
    except VolumeInvalid as exc:
        messages.error(request, " ".join(e for errors in exc.errors.values() for e in errors))
    except StorageQuotaExceeded as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Volume {volume.name} grows to "
                                  f"{form.cleaned_data['size_gib']} GiB.")
    return redirect(reverse("storage:volumes"))


@project_required
@require_POST
@scoped_object(Volume, Action.CHANGE)
def delete(request: TenantRequest, volume: Volume) -> HttpResponse:
    return removed(request, lambda: volume_delete(volume=volume, user=request.user),
                   busy=VolumeInUse, back="storage:volumes",
                   done=f"Volume {volume.name} and its data are being deleted.")


def removed(request: HttpRequest, remove: Callable[[], None], *, busy: type[Exception],
            done: str, back: str) -> HttpResponse:
    """Run `remove` (a volume's or a dataset's deletion), then the list page `back` again,
    saying `done` or why it was refused (`busy`: live workloads mount it)."""
    try:
        remove()
    except busy as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, done)
    return redirect(reverse(back))


@project_required
@require_GET
@tenant_required(Action.VIEW)
def datasets_page(request: TenantRequest) -> HttpResponse:
    """The datasets open to the current project (every role): what each holds and where a
    launch mounts it, read-only."""
    assert request.tenant is not None  # tenant_required
    return render(request, "storage/datasets.html", {
        "tenant": request.tenant,
        "datasets": datasets_open_to(request.identity, request.tenant)})
