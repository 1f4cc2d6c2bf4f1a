"""What storage asks of the apps above it, which it may not import (they import storage): a
hook of core.registry.

VOLUME_USERS: called in the transaction that deletes a volume, under the tenant's row lock
(which launches take too, so no launch can mount it meanwhile); every entry answers the live
things that mount it, by name (workloads registers its live workloads' mounts). A volume any
entry names is not deleted: 409 volume_in_use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from core.registry import Hook

if TYPE_CHECKING:
    from tenants.models import Tenant

    from .models import Dataset, Volume


class VolumeUsers(Protocol):
    def __call__(self, *, volume: Volume) -> list[str]: ...


VOLUME_USERS = Hook[VolumeUsers]("storage.volume_users", order=("workloads",))


class DatasetUsers(Protocol):
    """`tenants`: only the live things of those tenants (a dataset closed to them); None:
    every tenant's (a dataset deleted)."""

    def __call__(self, *, dataset: Dataset, tenants: list[Tenant] | None) -> list[str]: ...


# DATASET_USERS: as VOLUME_USERS, for a dataset deleted or closed to projects (409
# dataset_in_use); called with the dataset's row locked, which a launch that mounts it locks too
DATASET_USERS = Hook[DatasetUsers]("storage.dataset_users", order=("workloads",))
