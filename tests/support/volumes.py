"""Volumes with a history, made through storage's own services at the times a test names
(time_machine): made, seen bound by the tracker, grown, deleted and their row gone as the
claim's task leaves it. No cluster: the claim's tasks are sent on commit, which a test's
transaction never reaches, and the claim's deletion is answered by a stand-in."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import time_machine

from identity.models import User
from storage.models import StorageClass, Volume
from storage.services import (
    volume_claim_delete,
    volume_create,
    volume_delete,
    volume_grow,
    volume_observe,
)
from tenants.models import Quota, Tenant


class ClaimsGone:
    """A cluster in which every claim deleted was there."""

    def delete(self, kind: str, name: str, namespace: str | None = None) -> bool:
        return True


def volume_lived(tenant: Tenant, owner: User, *, name: str, size_gib: int, made_at: dt.datetime,
                 bound_at: dt.datetime | None, scope: str = "user",
                 grown: Sequence[tuple[dt.datetime, int]] = (),
                 deleted_at: dt.datetime | None = None) -> int:
    """The volume's id (its row is gone once deleted). `bound_at` None: its claim never bound."""
    Quota.objects.get_or_create(tenant=tenant)
    StorageClass.objects.get_or_create(name="standard",
                                       defaults={"expandable": True, "is_default": True})
    with time_machine.travel(made_at, tick=False):
        volume = volume_create(tenant=tenant, user=owner, name=name, size_gib=size_gib,
                               scope=scope)
    bound = {"status": {"phase": "Bound", "capacity": {"storage": f"{size_gib}Gi"}}}
    if bound_at is not None:
        with time_machine.travel(bound_at, tick=False):
            assert volume_observe(namespace=tenant.namespace, claim_name=volume.claim_name,
                                  claim=bound)
    for at, size in grown:
        with time_machine.travel(at, tick=False):
            volume = volume_grow(volume=volume, user=owner, size_gib=size)
    if deleted_at is not None:
        with time_machine.travel(deleted_at, tick=False):
            volume_delete(volume=Volume.objects.get(pk=volume.pk), user=owner)
        assert volume_claim_delete(volume_id=volume.pk, kube=ClaimsGone())  # type: ignore[arg-type]
    return volume.pk
