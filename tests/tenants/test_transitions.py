"""The tenant state machine (tenants/transitions.py): its table of edges, what a transition
writes, and checks that no code writes a tenant's state any other way and that the machine
imports nothing above it in the app. The race it settles (a reconcile's end against a tenant
marked deleting meanwhile) is replayed in test_provisioning.py on kubesim."""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from pathlib import Path

import pytest
from django.utils import timezone

from tenants.models import Tenant
from tenants.services import tenant_ensure
from tenants.transitions import ACTIVE, RECONCILED, TRANSITIONS, may_move, tenant_transition
from tests.state_machines import REPO, app_imports, modules_above, project_modules, state_writes

S = Tenant.State
THE_MACHINE = Path("tenants/transitions.py")


def tenant_in(state: str, **fields) -> Tenant:
    tenant = tenant_ensure(keystone_project_id=uuid.uuid4().hex, name=f"Vision Lab {uuid.uuid4().hex[:6]}")
    Tenant.objects.filter(pk=tenant.pk).update(state=state, **fields)
    tenant.refresh_from_db()
    return tenant


# -- the table -------------------------------------------------------------------------------

# the moves the portal makes, written out by hand (not derived from TRANSITIONS)
NEEDED = [
    (S.NEW, S.PROVISIONED), (S.NEW, S.FAILED),  # the first reconcile
    (S.PROVISIONED, S.PROVISIONED), (S.PROVISIONED, S.DRIFTED), (S.DRIFTED, S.PROVISIONED),
    (S.FAILED, S.PROVISIONED), (S.PROVISIONED, S.FAILED),  # later reconciles
    (S.NEW, S.DELETING), (S.PROVISIONED, S.DELETING), (S.DRIFTED, S.DELETING),
    (S.FAILED, S.DELETING),  # tenant_mark_deleting
    (S.DELETING, S.NEW),  # tenant_restore
    (S.DELETING, S.DELETED),  # tenant_namespace_delete
]
NEVER = [
    (S.DELETING, S.PROVISIONED), (S.DELETING, S.FAILED), (S.DELETING, S.DRIFTED),  # the race
    (S.DELETED, S.PROVISIONED), (S.DELETED, S.NEW), (S.DELETED, S.DELETING),
    (S.PROVISIONED, S.DELETED), (S.NEW, S.DELETED), (S.PROVISIONED, S.NEW),
]


@pytest.mark.parametrize(("current", "to"), NEEDED)
def test_the_moves_the_portal_makes_are_edges(current, to):
    assert may_move(current, to)


@pytest.mark.parametrize(("current", "to"), NEVER)
def test_moves_no_tenant_makes_are_not(current, to):
    assert not may_move(current, to)


def test_every_state_is_in_the_table_and_deleted_is_final():
    assert set(TRANSITIONS) == set(S.values)
    assert TRANSITIONS[S.DELETED] == frozenset()
    assert set(ACTIVE) == set(S.values) - {S.DELETING, S.DELETED}
    assert {state for state in ACTIVE if Tenant(state=state).is_active} == set(ACTIVE)
    assert set(RECONCILED) < set(ACTIVE)


# -- what a transition writes ------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("current", list(S.values))
@pytest.mark.parametrize("to", list(S.values))
def test_a_transition_is_written_exactly_when_the_table_has_it(current, to, caplog):
    tenant = tenant_in(current, state_reason="before")
    with caplog.at_level(logging.ERROR, logger="tenants.transitions"):
        moved = tenant_transition(tenant=tenant, allowed_from=(current,), to=to, reason="after")
    tenant.refresh_from_db()
    legal = current == to or to in TRANSITIONS[current]
    assert moved is legal
    assert (tenant.state, tenant.state_reason) == ((to, "after") if legal else
                                                   (current, "before"))
    assert ("is not a transition" in caplog.text) is not legal


@pytest.mark.django_db
def test_a_claim_from_other_states_writes_nothing():
    """A reconcile's end (from the active states) finds the tenant deleting: left so."""
    grace = timezone.now() + dt.timedelta(minutes=5)
    tenant = tenant_in(S.DELETING, state_reason="project gone", delete_after=grace)
    assert not tenant_transition(tenant=tenant, allowed_from=ACTIVE, to=S.PROVISIONED,
                                 reason="", last_reconciled_at=timezone.now())
    tenant.refresh_from_db()
    assert (tenant.state, tenant.state_reason, tenant.delete_after,
            tenant.last_reconciled_at) == (S.DELETING, "project gone", grace, None)
    with pytest.raises(ValueError, match="not tenant states"):
        tenant_transition(tenant=tenant, allowed_from=("sleeping",), to=S.NEW)


@pytest.mark.django_db
def test_reason_fields_and_the_instance():
    earlier = timezone.now() - dt.timedelta(hours=1)
    tenant = tenant_in(S.PROVISIONED, state_reason="", updated_at=earlier)
    stale = Tenant.objects.get(pk=tenant.pk)
    grace = timezone.now() + dt.timedelta(minutes=5)
    assert tenant_transition(tenant=tenant, allowed_from=ACTIVE, to=S.DELETING,
                             reason="x" * 3000, delete_after=grace)
    # the instance passed in is refreshed; the reason is cut to what a page shows
    assert (tenant.state, tenant.delete_after, len(tenant.state_reason)) == (S.DELETING, grace,
                                                                          2000)
    assert tenant.updated_at > earlier and stale.state == S.PROVISIONED
    # None keeps the reason
    assert tenant_transition(tenant=tenant, allowed_from=(S.DELETING,), to=S.DELETED)
    assert (tenant.state, tenant.state_reason) == (S.DELETED, "x" * 2000)


# -- nothing writes a tenant's state another way -----------------------------------------------

# the names tenants' writes start from outside their app (a write from any other name is
# caught by the workloads' check, tests/workloads/test_transitions.py, which counts every state
# write not rooted here as a workload's)
TENANT_NAMES = {"Tenant", "tenant"}


def tenant_state_writes(module: Path) -> list[int]:
    """Lines of `module` that write a tenant's state: any state write in the tenants app (its
    one model with a state is Tenant), and those of a tenant anywhere."""
    return [write.line for write in state_writes((REPO / module).read_text())
            if module.parts[0] == "tenants" or write.root in TENANT_NAMES]


def test_the_check_finds_each_way_of_writing_a_tenant_state():
    written = """
Tenant.objects.filter(pk=1).update(state="deleted")
tenant.state = Tenant.State.DELETING
tenant.state, tenant.state_reason = "new", ""
tenant.save(update_fields=["state", "state_reason"])
Tenant.objects.create(keystone_project_id="p", state="provisioned")
Tenant.objects.update_or_create(keystone_project_id="p", defaults={"state": "new"})
setattr(tenant, "state", "failed")
Tenant.objects.filter(pk=1).update(reason="x")
"""
    assert [write.line for write in state_writes(written)] == [2, 3, 4, 5, 6, 7, 8]
    assert {write.root for write in state_writes(written)} == {"Tenant", "tenant"}
    # and it sees the one place that does write it
    assert tenant_state_writes(THE_MACHINE)


def test_every_tenant_state_write_goes_through_the_transition():
    modules = project_modules()
    assert THE_MACHINE in modules and Path("tenants/provisioning.py") in modules
    offenders = [f"{module}:{line}" for module in modules if module != THE_MACHINE
                 for line in tenant_state_writes(module)]
    assert offenders == [], ("write tenant states with transitions.tenant_transition: "
                             f"{offenders}")


def test_the_state_machine_imports_nothing_above_it_in_the_app():
    above = modules_above(THE_MACHINE)
    assert {"tenants.services", "tenants.provisioning", "tenants.tasks",
            "tenants.keystone_sync"} <= above
    assert app_imports(THE_MACHINE) == {"tenants.models"}
