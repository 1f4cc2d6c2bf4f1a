"""Which claim a volume is, and what the caller may do with its files: the one question the
file API asks of the volumes (the storage app's Volume, its scope and owner).

This is the seam where the volumes plug in: `volume_files` answers for one volume and
`project_claims` names every claim a project's file server mounts. Until the storage app's
Volume answers them, no volume is known here: every volume id is a 404.
"""

from __future__ import annotations

import dataclasses

from identity.identity import Identity
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


def volume_files(*, identity: Identity, tenant: Tenant, volume_id: int) -> VolumeFiles:
    """The volume `volume_id` as the caller sees it: VolumeUnknown where they may not read
    it. `writable` is whether they may also write (their role, the volume's scope and owner,
    and the volume not read-only)."""
    raise VolumeUnknown(volume_id)


def project_claims(tenant: Tenant) -> list[ClaimMount]:
    """Every claim of the project that its file server mounts (read-only ones as such): one
    server serves all of them, so that opening a second volume does not restart it."""
    return []
