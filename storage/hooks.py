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
    from .models import Volume


class VolumeUsers(Protocol):
    def __call__(self, *, volume: Volume) -> list[str]: ...


VOLUME_USERS = Hook[VolumeUsers]("storage.volume_users", order=("workloads",))
