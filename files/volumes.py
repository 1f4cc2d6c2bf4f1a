"""Which claim a volume is, and what the caller may do with its files: the one question the
file API asks of the volumes (storage's Volume, its scope and owner).

`volume_files` answers for one volume: the caller sees its files wherever they see the volume
(readers too), and changes them wherever they may mount it in a launch (a member their own
volumes and the project's, a manager every one); `project_claims` names every bound claim a
project's file server mounts.
"""

from __future__ import annotations

import dataclasses

from identity.identity import Identity
from identity.scoping import Action
from storage.models import Volume
from tenants.models import Tenant

from .manifests import ClaimMount


class VolumeUnknown(Exception):
    """No volume of this id that the caller may see (another project's included): 404."""


class VolumeRefused(Exception):
    """The caller sees the volume but may not change its files (a reader; a read-only volume):
    403."""


@dataclasses.dataclass(frozen=True)
class VolumeFiles:
    tenant: Tenant
    claim: str  # the PersistentVolumeClaim in the tenant's namespace
    writable: bool  # may this caller change its files
    bound: bool = True  # the claim has its storage (a pending one cannot be mounted yet)


def volume_files(*, identity: Identity, tenant: Tenant, volume_id: int) -> VolumeFiles:
    """The volume `volume_id` as the caller sees it: VolumeUnknown where they may not read
    it. `writable` is whether they may also write (their role, the volume's scope and owner)."""
    rows = Volume.objects.restrict(identity, Action.VIEW).select_related("tenant")
    if not identity.is_admin:  # an admin reaches every project's volumes, as their rows
        rows = rows.filter(tenant=tenant)
    volume = rows.filter(pk=volume_id).first()
    if volume is None:
        raise VolumeUnknown(volume_id)
    return VolumeFiles(tenant=volume.tenant, claim=volume.claim_name,
                       writable=Volume.objects.permits(identity, Action.LAUNCH, volume),
                       bound=volume.state == Volume.State.BOUND)


def project_claims(tenant: Tenant) -> list[ClaimMount]:
    """Every bound claim of the project, which its file server mounts: one server serves all
    of them, so that opening a second volume does not restart it (a pending claim would keep
    the server's pod from starting)."""
    claims = (Volume.objects.filter(tenant=tenant, deleted_at__isnull=True,
                                    state=Volume.State.BOUND)
              .order_by("pk").values_list("claim_name", flat=True))
    return [ClaimMount(claim) for claim in claims]
