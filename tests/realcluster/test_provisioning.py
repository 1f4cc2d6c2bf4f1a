"""Tenant provisioning on the real API server, as the portal's own ServiceAccount: the same tests
as on kubesim (tests/tenants/test_provisioning.py) — every object admitted by real RBAC, admission
and validation, zero writes on the second reconcile, drift repaired (the NetworkPolicy of a
namespace made before the proxies rewritten; the open egress policy of one made before egress was limited
deleted, the egress policy of the site's settings admitted by the real validation), a refused
namespace name, the namespace deleted (by the real namespace controller) after the grace."""

import pytest

from tests.support.provisioning import tenant  # noqa: F401 - a fixture
from tests.tenants.test_provisioning import (  # noqa: F401 - collected here, against the real cluster
    test_a_concurrent_reconcile_that_got_there_first_does_not_fail_the_tenant,
    test_a_namespace_provisioned_before_the_egress_rules_loses_its_open_egress,
    test_a_namespace_provisioned_before_the_proxies_gets_the_new_isolation,
    test_a_new_tenant_gets_the_full_set_of_objects,
    test_a_quota_change_reaches_the_resource_quota,
    test_an_unreachable_cluster_fails_the_tenant_then_the_next_run_completes,
    test_deleting_a_tenant_removes_its_namespace_after_the_grace,
    test_drift_made_by_hand_is_put_back,
    test_the_cluster_refusing_fails_the_tenant_with_its_reason,
    test_the_second_reconcile_writes_nothing,
)

pytestmark = [pytest.mark.django_db, pytest.mark.realcluster]
