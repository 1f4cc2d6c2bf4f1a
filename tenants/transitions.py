"""The one way a tenant's state changes: `tenant_transition`, under the row lock.

Every writer of `Tenant.state` calls it: the reconcile (provisioned, drifted, failed),
`tenant_mark_deleting`, `tenant_restore` and the namespace's deletion (deleted). It applies a
change only when the row's state is now one the caller expects (`allowed_from`: a conditional
claim), and only along an edge of `TRANSITIONS`. So a reconcile that read its tenant as
provisioned, and was still talking to the cluster when the tenant was marked deleting, finds
it no longer in the states it may move from and leaves it deleting: the namespace's deletion,
which waits for a deleting tenant, goes ahead. Writing the same state again is no edge: it
refreshes the reason and the fields (a reconcile's `last_reconciled_at`).

An edge outside the table is refused: nothing written, an error logged, False (as
workloads/transitions.py does). A state name that does not exist is a typo, and raises
ValueError. Audit records stay with the callers, which know what they did (the workloads
stopped, whether the namespace existed). tests/tenants/test_transitions.py checks the table
and that no module writes the state any other way. A tenant's rows of the other clusters it
lives on (TenantCluster) are written here too, by `tenant_cluster_record`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from django.db import transaction
from django.utils import timezone

from core.contention import retry_on_contention

from .models import Tenant, TenantCluster

log = logging.getLogger(__name__)

State = Tenant.State

# what a reconcile may write, and may write over (tenant_reconcile)
RECONCILED = (State.PROVISIONED, State.DRIFTED, State.FAILED)
# a tenant whose namespace is kept: it may be reconciled, and marked deleting
ACTIVE = (State.NEW, *RECONCILED)
TRANSITIONS: Mapping[str, frozenset[str]] = {
    # the first reconcile; or deleted before it ran
    State.NEW: frozenset({*RECONCILED, State.DELETING}),
    # each reconcile says how the namespace was found; any may be marked deleting
    **{state: frozenset({*RECONCILED, State.DELETING}) for state in RECONCILED},
    # its namespace deleted after the grace; or restored (the project came back), and
    # provisioned anew from new
    State.DELETING: frozenset({State.DELETED, State.NEW}),
    # final: a tenant's namespace name is never reused
    State.DELETED: frozenset(),
}


def may_move(current: str, to: str) -> bool:
    """Whether a tenant in `current` may be written as `to` (the same state: always)."""
    return current == to or to in TRANSITIONS.get(current, frozenset())


def tenant_transition(*, tenant: Tenant, allowed_from: Iterable[str], to: str,
                      reason: str | None = None, **fields: Any) -> bool:
    """Move a tenant to `to` if its state is now one of `allowed_from`; True when written.

    Under the row lock (SELECT … FOR UPDATE in a transaction: inside the caller's, when it has
    one). `reason`: the state's reason users read (None keeps the one it has). `fields`: other
    columns written with it (delete_after, last_reconciled_at). `updated_at` always. `tenant`
    is refreshed with what was written.
    """
    allowed = frozenset(allowed_from)
    unknown = (allowed | {to}) - set(TRANSITIONS)
    if unknown:
        raise ValueError(f"not tenant states: {sorted(unknown)}")
    moved = retry_on_contention(_transition, tenant.pk, allowed, to, reason, fields,
                                what=f"tenant {tenant.pk} → {to}")
    if moved:
        tenant.refresh_from_db(fields=["state", "state_reason", "updated_at", *fields])
    return moved


def _transition(pk: int, allowed: frozenset[str], to: str, reason: str | None,
                fields: dict[str, Any]) -> bool:
    with transaction.atomic():
        current = (Tenant.objects.select_for_update().filter(pk=pk, state__in=allowed)
                   .values_list("state", flat=True).first())
        if current is None:
            return False  # gone, or moved meanwhile: the claim is someone else's
        if not may_move(current, to):
            log.error("tenant %s: %s → %s is not a transition a tenant makes; refused",
                      pk, current, to)
            return False
        updates: dict[str, Any] = {"state": to, "updated_at": timezone.now(), **fields}
        if reason is not None:
            updates["state_reason"] = reason[:2000]
        Tenant.objects.filter(pk=pk).update(**updates)
    return True


def tenant_cluster_record(*, row: TenantCluster, state: str, reason: str) -> None:
    """How the last reconcile of the tenant's namespace on another cluster went (its row of
    that cluster: provisioned, drifted or failed, with why). No transition rules bind it: each
    reconcile there says afresh what it found; the tenant's own state is the home cluster's."""
    TenantCluster.objects.filter(pk=row.pk).update(state=state, reason=reason[:2000],
                                                   last_reconciled_at=timezone.now())
