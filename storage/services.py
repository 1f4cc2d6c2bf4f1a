"""Writes of the storage domain: volumes made, grown and deleted, the storage classes an admin
offers, what the tracker saw of a volume's claim, and the datasets an admin publishes.

A volume is admitted as a workload is: in one transaction that locks the tenant row, against
the tenant's quota in force (tenants.selectors.quota_figures: `storage_gib`, `volumes`), so
that concurrent writes never over-admit and a launch that mounts a volume never races its
deletion. Its claim is made, grown and deleted by Celery tasks sent on commit (tasks.py).
"""

from __future__ import annotations

import datetime as dt
import math
import re
import unicodedata
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q, Sum
from django.utils import timezone

from audit.services import Actor, audit_record
from catalogue.fields import invisible_characters_refusal
from core.tasks import send_on_commit
from core.validation import FieldsInvalid
from identity.models import User
from kube.client import Kube, KubeError
from kube.labels import (
    HOME_CLAIM_NAME,
    LABEL_DATASET_ID,
    LABEL_PROJECT_ID,
    dataset_claim_name,
    dataset_volume_name,
    label_value,
    volume_claim_name,
)
from kube.quantity import parse_quantity
from tenants.models import Quota, Tenant
from tenants.selectors import quota_figures

from .buckets import bucket_answers
from .hooks import DATASET_USERS, VOLUME_USERS
from .manifests import (
    DATASET_CLAIM_GIB,
    ClaimSpec,
    copied_volume_source,
    make_claim_resize,
    make_volume_claim,
)
from .models import NAME_MAX_LENGTH, Dataset, StorageClass, Volume, VolumeSize
from .validation import DatasetInvalid, dataset_name_clean, dataset_source_clean, description_clean
from .validation import size_clean as dataset_size_clean

HOME_NAME = "home"  # the project volume mounted at the launch's `use_home`
MAX_SIZE_GIB = 1_000_000
GIB = 1024 ** 3


class VolumeInvalid(FieldsInvalid):
    """A volume write refused: `errors` maps each field to what is wrong with it."""


class StorageQuotaExceeded(Exception):
    """A volume the tenant's storage quota does not allow; the message names the limit."""

    code = "quota_exceeded"


class VolumeInUse(Exception):
    """A volume that live workloads mount: the message names them."""

    code = "volume_in_use"


def volume_snapshot(volume: Volume) -> dict[str, Any]:
    """A volume as plain data: what the audit trail keeps."""
    return {"id": volume.pk, "name": volume.name, "scope": volume.scope,
            "size_gib": volume.size_gib, "storage_class": volume.storage_class,
            "claim_name": volume.claim_name}


def claim_spec(volume: Volume) -> ClaimSpec:
    """The claim of a volume (its manifest: manifests.make_volume_claim)."""
    owner = volume.owner
    return ClaimSpec(volume_id=volume.pk, name=volume.claim_name,
                     namespace=volume.tenant.namespace,
                     project_id=volume.tenant.keystone_project_id,
                     owner_id=owner.keystone_user_id or str(owner.pk), size_gib=volume.size_gib,
                     storage_class=volume.storage_class,
                     access_mode=settings.PORTAL_VOLUME_ACCESS_MODE)


# --- the quota -------------------------------------------------------------------------------

def storage_used(tenant: Tenant, storage_class: str | None = None) -> tuple[int, int]:
    """(GiB, volumes) the tenant's volumes hold, as admission counts them (one query); of one
    storage class where it is named."""
    volumes = Volume.objects.filter(tenant=tenant, deleted_at__isnull=True)
    if storage_class is not None:
        volumes = volumes.filter(storage_class=storage_class)
    used = volumes.aggregate(gib=Sum("size_gib"), count=Count("pk"))
    return int(used["gib"] or 0), int(used["count"] or 0)


def _storage_check(tenant: Tenant, *, more_gib: int, more_volumes: int,
                   storage_class: str) -> None:
    """Raise StorageQuotaExceeded unless the tenant's quota in force leaves room, in all and
    within `storage_class` where the quota bounds that class; called with the tenant row
    locked."""
    quota = Quota.objects.get(tenant=tenant)
    figures = quota_figures(tenant, quota=quota).in_force
    gib, count = storage_used(tenant)
    if more_volumes and count + more_volumes > figures.volumes:
        raise StorageQuotaExceeded(f"{tenant.name} has {count} of {figures.volumes} volumes "
                                   "allowed; another would exceed the quota.")
    if gib + more_gib > figures.storage_gib:
        raise StorageQuotaExceeded(f"{tenant.name} uses {gib} of {figures.storage_gib} GiB of "
                                   f"storage; {more_gib} GiB more would exceed the quota.")
    limit = quota.storage_by_class().get(storage_class) if storage_class else None
    if limit is None:
        return
    gib, count = storage_used(tenant, storage_class)
    if more_volumes and limit["volumes"] is not None and count + more_volumes > limit["volumes"]:
        raise StorageQuotaExceeded(
            f"{tenant.name} has {count} of {limit['volumes']} volumes allowed in the storage "
            f"class {storage_class}; another would exceed the quota.")
    if limit["storage_gib"] is not None and gib + more_gib > limit["storage_gib"]:
        raise StorageQuotaExceeded(
            f"{tenant.name} uses {gib} of {limit['storage_gib']} GiB of the storage class "
            f"{storage_class}; {more_gib} GiB more would exceed the quota.")


def _size_record(volume: Volume, *, size_gib: int, at: dt.datetime, first: bool = False) -> None:
    """Write what the volume holds from `at` on (the usage report's GiB-days: VolumeSize),
    called with the volume's row locked. The first row (`first`) is written when its claim is
    first seen bound, once; a grow or a delete writes one only after it, since a volume that
    never bound held nothing."""
    started = VolumeSize.objects.filter(volume_id=volume.pk).exists()
    if started == first:
        return
    VolumeSize.objects.create(volume_id=volume.pk, tenant_id=volume.tenant_id,
                              owner_id=volume.owner_id, scope=volume.scope, size_gib=size_gib,
                              since=at)


def _locked(tenant: Tenant) -> Tenant:
    return Tenant.objects.select_for_update().get(pk=tenant.pk)


# --- volumes -------------------------------------------------------------------------------

def storage_class_for(name: str | None) -> str:
    """The class a new volume gets: the offered one it names (VolumeInvalid for another), else
    the admin's default, else the cluster's default (empty)."""
    offered = StorageClass.objects.offered()
    if name:
        if not offered.filter(name=name).exists():
            raise VolumeInvalid({"storage_class": [
                f"No storage class {name!r} is offered; one of: "
                + (", ".join(offered.values_list("name", flat=True)) or "none")]})
        return name
    default = offered.filter(is_default=True).first()
    return default.name if default is not None else ""


def volume_name_clean(name: Any) -> str:
    """A volume's name as stored: trimmed, whitespace runs made one space, 1 to 63
    characters, nothing invisible (its claim's name is derived from it and its id)."""
    if not isinstance(name, str):
        raise VolumeInvalid({"name": ["A name is required."]})
    refusal = invisible_characters_refusal(name)
    clean = re.sub(r"\s+", " ", unicodedata.normalize("NFC", name)).strip()
    if refusal or not clean or len(clean) > NAME_MAX_LENGTH:
        raise VolumeInvalid({"name": [refusal or f"Give a name of 1 to {NAME_MAX_LENGTH} "
                                                 "characters."]})
    return clean


def _size_clean(size_gib: Any) -> int:
    if isinstance(size_gib, bool) or not isinstance(size_gib, int) or \
            not 1 <= size_gib <= MAX_SIZE_GIB:
        raise VolumeInvalid({"size_gib": [f"Give a whole number of GiB from 1 to {MAX_SIZE_GIB}."]})
    return size_gib


def _name_taken(tenant: Tenant, user: User, name: str, scope: str) -> bool:
    rows = Volume.objects.filter(tenant=tenant, name=name, scope=scope, deleted_at__isnull=True)
    return (rows if scope == Volume.Scope.PROJECT else rows.filter(owner=user)).exists()


def volume_create(*, tenant: Tenant, user: User, name: str, size_gib: int, scope: str,
                  storage_class: str | None = None) -> Volume:
    """Make a volume (validated fields: api/serializers.py, forms.py) and send its claim's
    creation on commit. Who may make which scope is the caller's check (a member their own,
    a manager the project's); raises VolumeInvalid, StorageQuotaExceeded."""
    name, size_gib = volume_name_clean(name), _size_clean(size_gib)
    if scope not in Volume.Scope.values:
        raise VolumeInvalid({"scope": [f"One of: {', '.join(Volume.Scope.values)}."]})
    class_name = storage_class_for(storage_class)
    with transaction.atomic():
        tenant = _locked(tenant)
        if not tenant.is_active:
            raise StorageQuotaExceeded(f"{tenant.name} is being deleted; no volume can be made.")
        if _name_taken(tenant, user, name, scope):
            raise VolumeInvalid({"name": [f"A {scope} volume named {name!r} exists already."]})
        _storage_check(tenant, more_gib=size_gib, more_volumes=1, storage_class=class_name)
        volume = _volume_row(tenant=tenant, user=user, name=name, size_gib=size_gib,
                             scope=scope, storage_class=class_name)
        audit_record(actor=user, action="volume.create", tenant=tenant,
                     target=volume.claim_name, after=volume_snapshot(volume))
    return volume


def _volume_row(*, tenant: Tenant, user: User, name: str, size_gib: int, scope: str,
                storage_class: str, claim_name: str | None = None) -> Volume:
    volume = Volume.objects.create(tenant=tenant, owner=user, name=name, size_gib=size_gib,
                                   scope=scope, storage_class=storage_class)
    volume.claim_name = claim_name or volume_claim_name(volume.pk, name)
    volume.save(update_fields=["claim_name"])
    send_on_commit("storage.tasks.volume_claim_apply_task", volume.pk)
    return volume


def home_size_gib() -> int:
    """PORTAL_HOME_VOLUME_SIZE ("100Gi") in whole GiB, rounded up."""
    size: int = math.ceil(parse_quantity(settings.PORTAL_HOME_VOLUME_SIZE) / GIB)
    return max(1, size)


def volume_home_ensure(*, tenant: Tenant, user: User) -> Volume:
    """The project's home volume (a project volume named "home" on the claim workloads have
    always mounted at /home/portal), made the first time a launch asks for it. Called inside
    the launch's transaction, with the tenant row locked; raises StorageQuotaExceeded when
    the quota has no room for it."""
    home = Volume.objects.filter(tenant=tenant, claim_name=HOME_CLAIM_NAME,
                                 deleted_at__isnull=True).first()
    if home is not None:
        return home
    size = home_size_gib()
    _storage_check(tenant, more_gib=size, more_volumes=1,
                   storage_class=settings.PORTAL_HOME_STORAGE_CLASS)
    name = HOME_NAME if not _name_taken(tenant, user, HOME_NAME, Volume.Scope.PROJECT) \
        else f"{HOME_NAME}-{tenant.pk}"
    home = _volume_row(tenant=tenant, user=user, name=name, size_gib=size,
                       scope=Volume.Scope.PROJECT,
                       storage_class=settings.PORTAL_HOME_STORAGE_CLASS,
                       claim_name=HOME_CLAIM_NAME)
    audit_record(actor=user, action="volume.create", tenant=tenant, target=home.claim_name,
                 after=volume_snapshot(home))
    return home


def volume_grow(*, volume: Volume, user: Actor, size_gib: int) -> Volume:
    """Grow a volume in place: only larger, only where its class can expand; the claim is
    patched on commit. Raises VolumeInvalid, StorageQuotaExceeded."""
    size_gib = _size_clean(size_gib)
    with transaction.atomic():
        tenant = _locked(volume.tenant)
        volume = Volume.objects.select_for_update().get(pk=volume.pk)
        if size_gib == volume.size_gib:
            return volume
        if size_gib < volume.size_gib:
            raise VolumeInvalid({"size_gib": [
                f"A volume only grows: it holds {volume.size_gib} GiB now."]})
        if not StorageClass.objects.offered().filter(name=volume.storage_class,
                                                     expandable=True).exists():
            raise VolumeInvalid({"size_gib": [
                f"Volumes of the storage class {volume.storage_class or '(the default)'!r} "
                "cannot grow in place."]})
        _storage_check(tenant, more_gib=size_gib - volume.size_gib, more_volumes=0,
                       storage_class=volume.storage_class)
        before = volume_snapshot(volume)
        volume.size_gib = size_gib
        volume.save(update_fields=["size_gib", "updated_at"])
        _size_record(volume, size_gib=size_gib, at=volume.updated_at)
        audit_record(actor=user, action="volume.grow", tenant=tenant, target=volume.claim_name,
                     before=before, after=volume_snapshot(volume))
        send_on_commit("storage.tasks.volume_claim_apply_task", volume.pk)
    return volume


def volume_delete(*, volume: Volume, user: Actor) -> None:
    """Delete a volume that no live workload mounts (VolumeInUse names those that do): the
    row is marked at once (its quota freed), the project's file server is stopped, its claim
    and then the row go in a task."""
    with transaction.atomic():
        tenant = _locked(volume.tenant)
        volume = Volume.objects.select_for_update().get(pk=volume.pk)
        users = [name for entry in VOLUME_USERS for name in entry(volume=volume)]
        if users:
            raise VolumeInUse(f"{volume.name} is mounted by {', '.join(sorted(users)[:5])}"
                              + (f" and {len(users) - 5} more" if len(users) > 5 else "")
                              + "; stop them first.")
        volume.deleted_at = deleted_at = timezone.now()
        volume.save(update_fields=["deleted_at", "updated_at"])
        _size_record(volume, size_gib=0, at=deleted_at)
        audit_record(actor=user, action="volume.delete", tenant=tenant,
                     target=volume.claim_name, before=volume_snapshot(volume))
        # the project's file server mounts every claim of the project: the claim is released
        # only once that pod is gone, and the server is made again without it on demand (by
        # name: storage sits below files)
        send_on_commit("files.tasks.file_server_stop_task", tenant.namespace)
        send_on_commit("storage.tasks.volume_claim_delete_task", volume.pk)


# --- the claim in the cluster ----------------------------------------------------------------

def volume_observe(*, namespace: str, claim_name: str, claim: dict[str, Any] | None,
                   warning: str = "") -> bool:
    """What the tracker saw of a claim (None: gone) and the provisioner's last warning about
    it ("ProvisioningFailed: …"), written to its volume. True when something changed."""
    volume = Volume.objects.filter(tenant__namespace=namespace, claim_name=claim_name,
                                   deleted_at__isnull=True).first()
    if volume is None:
        return False
    state, reason, capacity = volume.state, volume.reason, volume.capacity_gib
    phase = ((claim or {}).get("status") or {}).get("phase") or ""
    if claim is None:
        state, reason = Volume.State.PENDING, "Its claim is not in the cluster (yet)."
    elif phase == "Bound":
        state, reason = Volume.State.BOUND, ""
        size = (((claim.get("status") or {}).get("capacity")) or {}).get("storage")
        if size:
            capacity = max(0, int(parse_quantity(size) // GIB))
        if capacity and capacity < volume.size_gib:
            reason = f"Growing: {capacity} of {volume.size_gib} GiB so far."
    elif phase == "Lost":
        state, reason = Volume.State.FAILED, "Its PersistentVolume is gone (Lost)."
    elif warning:
        state, reason = Volume.State.FAILED, warning
    else:
        state, reason = Volume.State.PENDING, "Waiting for the storage to be provisioned."
    if (state, reason, capacity) == (volume.state, volume.reason, volume.capacity_gib):
        return False
    now = timezone.now()
    with transaction.atomic():
        # the update locks the row, as a grow or a delete does: the size read after it is
        # the one the first accounting row must have
        changed = Volume.objects.filter(pk=volume.pk, deleted_at__isnull=True).update(
            state=state, reason=reason[:2000], capacity_gib=capacity, updated_at=now)
        if changed and state == Volume.State.BOUND and volume.state != Volume.State.BOUND:
            volume.size_gib = Volume.objects.values_list("size_gib", flat=True).get(pk=volume.pk)
            _size_record(volume, size_gib=volume.size_gib, at=now, first=True)
    return bool(changed)


def volume_claim_apply(*, volume_id: int, kube: Kube | None = None) -> str:
    """Make the volume's claim, or grow it to the volume's size: idempotent (409 is "already
    there", then only its size is compared). What was done: created, resized or nothing."""
    volume = Volume.objects.select_related("tenant", "owner").filter(
        pk=volume_id, deleted_at__isnull=True).first()
    if volume is None:
        return "nothing"
    kube = kube or Kube()
    spec = claim_spec(volume)
    claim = kube.get("PersistentVolumeClaim", spec.name, spec.namespace)
    if claim is None:
        try:
            kube.create(make_volume_claim(spec))
            return "created"
        except KubeError as exc:
            if exc.code != 409:
                raise
            claim = kube.get("PersistentVolumeClaim", spec.name, spec.namespace) or {}
    asked = (((claim.get("spec") or {}).get("resources") or {}).get("requests") or {}).get(
        "storage")
    if asked and parse_quantity(asked) >= volume.size_gib * GIB:
        return "nothing"
    kube.patch("PersistentVolumeClaim", spec.name, make_claim_resize(volume.size_gib),
               spec.namespace)
    return "resized"


def volume_claim_delete(*, volume_id: int, kube: Kube | None = None) -> bool:
    """Delete a deleted volume's claim, then its row. True when the claim was there."""
    volume = Volume.objects.select_related("tenant").filter(
        pk=volume_id, deleted_at__isnull=False).first()
    if volume is None:
        return False
    found = (kube or Kube()).delete("PersistentVolumeClaim", volume.claim_name,
                                    volume.tenant.namespace)
    volume.delete()
    return found


# --- the storage classes offered ---------------------------------------------------------------

def storage_class_set(*, user: Actor, name: str, description: str = "",
                      expandable: bool = False, is_default: bool = False,
                      kube: Kube | None = None) -> StorageClass:
    """Offer (or describe again) a StorageClass of the cluster: it must be there, and may be
    expandable only where the cluster's class allows volume expansion. Raises VolumeInvalid;
    KubeError when the cluster cannot be asked."""
    found = (kube or Kube()).get("StorageClass", name)
    if found is None:
        raise VolumeInvalid({"name": [f"The cluster has no StorageClass {name!r}."]})
    if expandable and not found.get("allowVolumeExpansion"):
        raise VolumeInvalid({"expandable": [
            f"The cluster's StorageClass {name!r} does not allow volume expansion."]})
    with transaction.atomic():
        if is_default:
            StorageClass.objects.exclude(name=name).update(is_default=False)
        offered, created = StorageClass.objects.update_or_create(
            name=name, defaults={"description": description, "expandable": expandable,
                                 "is_default": is_default, "enabled": True})
        audit_record(actor=user, action="storage_class.set", target=name,
                     after={"name": name, "description": description,
                            "expandable": expandable, "is_default": is_default})
    return offered


def storage_class_withdraw(*, user: Actor, offered: StorageClass) -> None:
    """Offer a class no more: volumes of it stay as they are."""
    with transaction.atomic():
        offered.delete()
        audit_record(actor=user, action="storage_class.withdraw", target=offered.name)


# --- datasets ---------------------------------------------------------------------------------

class DatasetInUse(Exception):
    """A dataset that live workloads mount (in the projects it would be closed to)."""

    code = "dataset_in_use"


def dataset_snapshot(dataset: Dataset) -> dict[str, Any]:
    """A dataset as plain data: what the audit trail keeps."""
    return {"id": dataset.pk, "name": dataset.name, "kind": dataset.kind,
            "size_gib": dataset.size_gib, "source": dataset.source,
            "open_to_all": dataset.open_to_all,
            "projects": sorted(dataset.tenants.values_list("name", flat=True))}


def _source_resolve(kind: str, source: dict[str, Any], kube: Kube | None) -> dict[str, Any]:
    """What the dataset keeps of its source: as checked, and for a named PersistentVolume,
    where its data is, copied from the cluster now (so each project's copy is made from the
    row alone). Raises DatasetInvalid; KubeError when the cluster cannot be asked."""
    if kind == Dataset.Kind.S3 and not settings.PORTAL_S3_CSI_DRIVER:
        raise DatasetInvalid({"kind": ["This site mounts no S3 bucket (PORTAL_S3_CSI_DRIVER "
                                       "is empty)."]})
    if kind == Dataset.Kind.S3:
        bucket_answers(source["endpoint"], source["bucket"])
    if kind != Dataset.Kind.PV:
        return source
    name = source["persistent_volume"]
    found = (kube or Kube()).get("PersistentVolume", name)
    if found is None:
        raise DatasetInvalid({"persistent_volume": [
            f"The cluster has no PersistentVolume {name!r}."]})
    labels = (found.get("metadata") or {}).get("labels") or {}
    if LABEL_DATASET_ID in labels:
        raise DatasetInvalid({"persistent_volume": [
            f"{name!r} is a dataset's own copy; name the volume it was made from."]})
    copied = copied_volume_source(found)
    if "hostPath" in copied:
        # Pod Security keeps a node's own files from tenants' pods; a copy would not
        raise DatasetInvalid({"persistent_volume": [
            f"{name!r} is a hostPath volume: a node's own files are never published."]})
    if not set(copied) - {"mountOptions", "nodeAffinity"}:
        raise DatasetInvalid({"persistent_volume": [f"{name!r} names no source of data."]})
    return {"persistent_volume": name, "spec": copied}


def _tenants_of(open_to_all: bool, tenants: list[Tenant]) -> set[int]:
    """The tenants a dataset is open to, by id."""
    if open_to_all:
        return set(Tenant.objects.values_list("pk", flat=True))
    return {tenant.pk for tenant in tenants}


def _reconcile_namespaces(tenant_ids: set[int]) -> None:
    """Their ResourceQuota leaves room for one claim per dataset open to them."""
    for tenant_id in sorted(tenant_ids):
        send_on_commit("tenants.tasks.tenant_reconcile_task", tenant_id)


def dataset_create(*, user: Actor, name: str, description: str, size_gib: int, kind: str,
                   source: dict[str, Any], open_to_all: bool, tenants: list[Tenant],
                   kube: Kube | None = None) -> Dataset:
    """Publish a dataset (an admin's: the caller checks). Raises DatasetInvalid; KubeError
    when a named PersistentVolume cannot be looked up."""
    name, description = dataset_name_clean(name), description_clean(description)
    size_gib = dataset_size_clean(size_gib)
    source = _source_resolve(kind, dataset_source_clean(kind, source), kube)
    with transaction.atomic():
        if Dataset.objects.filter(name=name).exists():
            raise DatasetInvalid({"name": [f"A dataset named {name!r} exists already."]})
        dataset = Dataset.objects.create(name=name, description=description, kind=kind,
                                         size_gib=size_gib, source=source,
                                         open_to_all=open_to_all,
                                         created_by=user if isinstance(user, User) else None)
        dataset.tenants.set([] if open_to_all else tenants)
        audit_record(actor=user, action="dataset.create", target=name,
                     after=dataset_snapshot(dataset))
        _reconcile_namespaces(_tenants_of(open_to_all, tenants))
    return dataset


def _users(dataset: Dataset, tenants: list[Tenant] | None) -> None:
    users = [name for entry in DATASET_USERS for name in entry(dataset=dataset, tenants=tenants)]
    if users:
        raise DatasetInUse(f"{dataset.name} is mounted by {', '.join(sorted(users)[:5])}"
                           + (f" and {len(users) - 5} more" if len(users) > 5 else "")
                           + "; stop them first.")


def dataset_update(*, dataset: Dataset, user: Actor, changes: dict[str, Any]) -> Dataset:
    """Change a dataset's name, description, size or who it is open to (its source stays: a
    new one is a new dataset). Closing it to projects where live workloads mount it raises
    DatasetInUse; their claims and volumes go in a task. Raises DatasetInvalid."""
    clean: dict[str, Any] = {}
    if "name" in changes:
        clean["name"] = dataset_name_clean(changes["name"])
    if "description" in changes:
        clean["description"] = description_clean(changes["description"])
    if "size_gib" in changes:
        clean["size_gib"] = dataset_size_clean(changes["size_gib"])
    if "open_to_all" in changes:
        clean["open_to_all"] = bool(changes["open_to_all"])
    with transaction.atomic():
        dataset = Dataset.objects.select_for_update().get(pk=dataset.pk)
        if "name" in clean and Dataset.objects.filter(name=clean["name"]).exclude(
                pk=dataset.pk).exists():
            raise DatasetInvalid({"name": [f"A dataset named {clean['name']!r} exists "
                                           "already."]})
        before = dataset_snapshot(dataset)
        tenants = list(changes["tenants"]) if "tenants" in changes else list(
            dataset.tenants.all())
        open_to_all = clean.get("open_to_all", dataset.open_to_all)
        was = _tenants_of(dataset.open_to_all, list(dataset.tenants.all()))
        now = _tenants_of(open_to_all, tenants)
        closed = list(Tenant.objects.filter(pk__in=was - now))
        if closed:
            _users(dataset, closed)
        for field, value in clean.items():
            setattr(dataset, field, value)
        dataset.save()
        dataset.tenants.set([] if open_to_all else tenants)
        audit_record(actor=user, action="dataset.update", target=dataset.name, before=before,
                     after=dataset_snapshot(dataset))
        if closed:
            send_on_commit("storage.tasks.dataset_claims_delete_task", dataset.pk,
                           sorted(tenant.namespace for tenant in closed))
        _reconcile_namespaces(was ^ now)
    return dataset


def dataset_delete(*, dataset: Dataset, user: Actor) -> None:
    """Withdraw a dataset no live workload mounts (DatasetInUse names those that do): the row
    goes now, every project's claim and volume in a task (found by their label)."""
    with transaction.atomic():
        dataset = Dataset.objects.select_for_update().get(pk=dataset.pk)
        _users(dataset, None)
        opened = _tenants_of(dataset.open_to_all, list(dataset.tenants.all()))
        audit_record(actor=user, action="dataset.delete", target=dataset.name,
                     before=dataset_snapshot(dataset))
        send_on_commit("storage.tasks.dataset_claims_delete_task", dataset.pk, None)
        _reconcile_namespaces(opened)
        dataset.delete()


def dataset_claims_delete(*, dataset_id: int, namespaces: list[str] | None,
                          kube: Kube | None = None) -> int:
    """Delete a dataset's claims and volumes: in `namespaces` (closed to them), or every one
    the cluster holds (deleted). A namespace it is open to again is left alone. How many
    volumes were deleted."""
    kube = kube or Kube()
    dataset = Dataset.objects.filter(pk=dataset_id).first()
    if namespaces is None:
        found = kube.list("PersistentVolume",
                          label_selector=f"{LABEL_DATASET_ID}={dataset_id}").get("items") or []
        namespaces = sorted({((pv.get("spec") or {}).get("claimRef") or {}).get("namespace", "")
                             for pv in found} - {""})
    if dataset is not None:  # still there: keep what its projects may mount now
        opened = set(Tenant.objects.filter(
            pk__in=_tenants_of(dataset.open_to_all, list(dataset.tenants.all())))
            .values_list("namespace", flat=True))
        namespaces = [namespace for namespace in namespaces if namespace not in opened]
    deleted = 0
    for namespace in namespaces:
        kube.delete("PersistentVolumeClaim", dataset_claim_name(dataset_id), namespace)
        deleted += bool(kube.delete("PersistentVolume",
                                    dataset_volume_name(dataset_id, namespace)))
    return deleted


def storage_allowance_of(*, tenant: Tenant) -> tuple[int, int]:
    """The room the tenant's ResourceQuota keeps for dataset claims (tenants'
    CLAIM_ALLOWANCES): one claim of DATASET_CLAIM_GIB per dataset open to it."""
    count = Dataset.objects.filter(Q(open_to_all=True) | Q(tenants=tenant)).distinct().count()
    return count, count * DATASET_CLAIM_GIB


def datasets_release_for_tenant(*, tenant: Tenant, user: Any, reason: str) -> int:
    """A tenant being deleted (tenants' TENANT_DELETING): its datasets' claims and volumes go
    on commit (a volume is cluster-scoped, and would outlive the namespace). Stops no
    workload: 0."""
    send_on_commit("storage.tasks.tenant_dataset_claims_delete_task", tenant.namespace,
                   tenant.keystone_project_id)
    return 0


def tenant_dataset_claims_delete(*, namespace: str, project_id: str,
                                 kube: Kube | None = None) -> int:
    """Delete every dataset's claim and volume of one namespace (its tenant is being deleted):
    found by their labels. How many volumes were deleted."""
    kube = kube or Kube()
    found = kube.list("PersistentVolume", label_selector=(
        f"{LABEL_DATASET_ID},{LABEL_PROJECT_ID}={label_value(project_id)}")).get("items") or []
    deleted = 0
    for volume in found:
        ref = (volume.get("spec") or {}).get("claimRef") or {}
        if ref.get("namespace") != namespace:
            continue
        kube.delete("PersistentVolumeClaim", ref.get("name", ""), namespace)
        deleted += bool(kube.delete("PersistentVolume", volume["metadata"]["name"]))
    return deleted
