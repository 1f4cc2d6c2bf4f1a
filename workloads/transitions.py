"""The one way a workload's state changes: `workload_transition`, under the row lock.

Every writer of `Workload.state` — the create and stop tasks, `workload_stop` (users, culling,
the runtime limit, tenant deletion), the tracker — calls it. It applies a change only when the
row's current state is one the caller expects (`allowed_from`: a conditional claim, so two
writers racing for one workload cannot both move it), and only along an edge of `TRANSITIONS`.
Writing the same state again is no edge: it refreshes the reason and facts (the tracker's
"still pending, now for another reason"; a finished Job's exit code that arrived after its
verdict) or counts a retried claim (creating → creating).

An edge outside the table is refused: nothing written, an error logged, False. It is not
raised, not even with DEBUG on (the demo runs with it): the tracker's edges come from what the
cluster shows, and an exception would end its cycle for every workload over one of them, cycle
after cycle; refused and logged, the others go on and the one stays where it was. The table is
checked by tests/workloads/test_transitions.py (every move the tracker can derive is an edge),
as is that no module writes the state any other way. A state name that does not exist is a
typo, and raises ValueError.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from django.db import transaction
from django.utils import timezone

from core.contention import retry_on_contention

from .journal import state_notice, workload_event
from .models import Workload

log = logging.getLogger(__name__)

State = Workload.State

# where each state may go; the final states go nowhere (a late or replayed event never
# resurrects a finished workload)
_LIVE = Workload.LIVE_STATES
_VERDICTS = (State.SUCCEEDED, State.FAILED)
TRANSITIONS: Mapping[str, frozenset[str]] = {
    # the create task claims it; a user may stop it before it is created
    State.SUBMITTED: frozenset({State.CREATING, State.STOPPING}),
    # the create task: queued (Kueue) or pending, failed when the cluster refuses or stays away;
    # the tracker may see its objects move on before the task writes its own result
    State.CREATING: frozenset({*_LIVE, *_VERDICTS, State.STOPPING}),
    # the tracker, from what the cluster shows: admitted, scheduled, started, finished, vanished
    State.QUEUED: frozenset({State.PENDING, State.RUNNING, *_VERDICTS, State.STOPPING}),
    State.PENDING: frozenset({State.QUEUED, State.RUNNING, *_VERDICTS, State.STOPPING}),
    # running → queued: Kueue preempted it for the tenant that lent its GPUs (queueing/notices);
    # running → pending: its pod is replaced, or a Job retries a failed attempt
    State.RUNNING: frozenset({State.QUEUED, State.PENDING, *_VERDICTS, State.STOPPING}),
    # the stop task once its objects are deleted (or the tracker, once they are all gone)
    State.STOPPING: frozenset({State.STOPPED}),
    State.SUCCEEDED: frozenset(),
    State.FAILED: frozenset(),
    State.STOPPED: frozenset(),
}
# what a stop may move (workload_stop): every state with an edge to stopping
STOPPABLE = tuple(state for state, nexts in TRANSITIONS.items() if State.STOPPING in nexts)


def may_move(current: str, to: str) -> bool:
    """Whether a workload in `current` may be written as `to` (the same state: always)."""
    return current == to or to in TRANSITIONS.get(current, frozenset())


def workload_transition(*, workload: Workload | None = None, workload_id: int | None = None,
                        allowed_from: Iterable[str], to: str, reason: str | None = None,
                        event: Mapping[str, str] | None = None, **fields: Any) -> bool:
    """Move a workload to `to` if its state is now one of `allowed_from`; True when written.

    Under the row lock (SELECT … FOR UPDATE in a transaction). `reason`: the text users read
    (None keeps the one it has). `fields`: other columns written with it (node, address,
    exit_code, started_at, expires_at, stop_requested_at, launch_attempts=F(...) …).
    Timestamps: `updated_at` always; `started_at` on entering running, unless given or already
    set; `finished_at` on entering a final state, unless given (a final state written again
    keeps the one it has). `event`: workload_event's
    keyword arguments (reason, message, type, source), recorded in the same transaction when
    the state moved. `workload`, when given, is refreshed with what was written.

    Outside a transaction, lock contention is waited out and retried (core/contention.py);
    inside one, it is the caller's transaction that is retried (the tracker's steps are).
    """
    pk = workload.pk if workload is not None else workload_id
    if pk is None:
        raise TypeError("workload_transition needs workload or workload_id")
    allowed = frozenset(allowed_from)
    unknown = allowed - set(TRANSITIONS) | ({to} - set(TRANSITIONS))
    if unknown:
        raise ValueError(f"not workload states: {sorted(unknown)}")
    moved = retry_on_contention(_transition, pk, allowed, to, reason, event, fields,
                                what=f"workload {pk} → {to}")
    if moved and workload is not None:
        workload.refresh_from_db()
    return moved


def _transition(pk: int, allowed: frozenset[str], to: str, reason: str | None,
                event: Mapping[str, str] | None, fields: dict[str, Any]) -> bool:
    with transaction.atomic():
        locked = (Workload.objects.select_for_update()
                  .filter(pk=pk, state__in=allowed).first())
        if locked is None:
            return False  # gone, or moved meanwhile: the claim is someone else's
        current = locked.state
        if not may_move(current, to):
            log.error("workload %s: %s → %s is not a transition a workload makes; refused",
                      pk, current, to)
            return False
        now = timezone.now()
        updates: dict[str, Any] = {"state": to, "updated_at": now, **fields}
        if reason is not None:
            updates["reason"] = reason
        if to == State.RUNNING and "started_at" not in updates:
            updates["started_at"] = locked.started_at or now
        if to in Workload.FINAL_STATES and current != to and not updates.get("finished_at"):
            updates["finished_at"] = now
        Workload.objects.filter(pk=pk).update(**updates)
        if event is not None and current != to:
            workload_event(workload=locked, **event)
        if current != to:
            state_notice(locked, before=current, after=to,
                         reason=updates.get("reason", locked.reason), at=now)
    return True
