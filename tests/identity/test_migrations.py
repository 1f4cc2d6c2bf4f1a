"""The data migration that keys users by Keystone user id: rows as the name-keyed mirror left
them (a stale row included) → rows keyed by id; budget caps by name → by id; audit actors given
their id. Migrated back and forth on the test's PostgreSQL database."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("keystone", "0001_initial"), ("budgets", "0001_initial"), ("audit", "0001_initial")]


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state(targets).apps


def test_rows_caps_and_actors_move_from_the_name_to_the_keystone_id():
    executor = MigrationExecutor(connection)
    after = executor.loader.graph.leaf_nodes()
    old = migrate(BEFORE)
    try:
        User = old.get_model("keystone", "User")
        # the impostor (Default, named 'victim@D') took the name; D's victim was marked stale
        impostor = User.objects.create(username="victim@D", keystone_user_id="id-at")
        victim = User.objects.create(username="victim@D~stale-20261128101010000000",
                                     keystone_user_id="id-d", domain_id="dom-d",
                                     domain_name="D", is_active=False)
        researcher = User.objects.create(username="researcher", keystone_user_id="id-r")
        User.objects.create(username="id-r")  # a local row that holds an id as its name
        Tenant = old.get_model("tenants", "Tenant")
        tenant = Tenant.objects.create(keystone_project_id="p1", name="lab", namespace="gp-lab")
        Budget = old.get_model("budgets", "Budget")
        Budget.objects.create(tenant=tenant, gpu_hours=100,
                              user_caps={"researcher": 5, "victim@D": 2, "ghost": 1},
                              settled_by_user={"researcher": 1.5}, settled_used=1.5)
        AuditRecord = old.get_model("audit", "AuditRecord")
        AuditRecord.objects.create(actor=researcher, actor_name="researcher", action="x")
    finally:
        new = migrate(after)

    User = new.get_model("keystone", "User")
    rows = {u.keystone_user_id: (u.username, u.name, u.domain_name)
            for u in User.objects.exclude(keystone_user_id=None)}
    assert rows == {"id-at": ("id-at", "victim@D", "Default"),
                    "id-d": ("id-d", "victim", "D"),
                    "id-r": ("id-r", "researcher", "Default")}
    local = User.objects.get(keystone_user_id=None)
    assert local.username == f"id-r~local-{local.pk}" and local.name == "id-r"
    budget = new.get_model("budgets", "Budget").objects.get()
    assert budget.user_caps == {"id-r": 5, "id-at": 2}  # a cap of nobody is dropped
    assert budget.settled_by_user == {} and budget.settled_until is None
    record = new.get_model("audit", "AuditRecord").objects.get()
    assert record.actor_user_id == "id-r" and record.actor_name == "researcher"
    assert impostor.pk != victim.pk


def test_the_migration_goes_back_to_names():
    executor = MigrationExecutor(connection)
    after = executor.loader.graph.leaf_nodes()
    new = migrate(after)
    User = new.get_model("keystone", "User")
    User.objects.create(username="id-at", keystone_user_id="id-at", name="victim@D")
    User.objects.create(username="id-d", keystone_user_id="id-d", name="victim",
                        domain_id="dom-d", domain_name="D")
    Tenant = new.get_model("tenants", "Tenant")
    tenant = Tenant.objects.create(keystone_project_id="p1", name="lab", namespace="gp-lab")
    new.get_model("budgets", "Budget").objects.create(tenant=tenant, gpu_hours=10,
                                                       user_caps={"id-d": 3})
    try:
        old = migrate(BEFORE)
        names = sorted(old.get_model("keystone", "User").objects.values_list("username",
                                                                             flat=True))
        assert names[0] == "victim@D" and names[1].startswith("victim@D~stale-")
        assert old.get_model("budgets", "Budget").objects.get().user_caps == {
            old.get_model("keystone", "User").objects.get(keystone_user_id="id-d").username: 3}
    finally:
        migrate(after)
