"""The launch API's tests (tests/workloads/test_launch_api.py, and the GPU types' from
tests/catalogue/test_api.py) on the real control plane: those whose outcome depends on the
cluster — the objects a launch creates, capacity and free GPUs from the real nodes and the real
scheduler's bindings, stop and delete, the tenant's deletion, the home volume, logs, argv kept
as given. The API-only ones (validation, roles, filters, isolation, idempotency, quota
arithmetic) decide in the portal before any cluster call and run once, on kubesim."""

import pytest

from tests.catalogue.test_api import (  # noqa: F401 - collected here, against the real cluster
    test_gpu_types_report_capacity_and_free,
)
from tests.support.journeys import JUPYTER, vision  # noqa: F401 - what the tests use
from tests.workloads.test_launch_api import (  # noqa: F401 - collected here, against the real cluster
    test_a_launch_beyond_the_quota_is_403_naming_the_limit,
    test_a_quarter_t4_and_a_mig_slice_run_on_their_shared_nodes,
    test_a_request_that_can_never_fit_is_refused_at_once,
    test_delete_hides_it_and_frees_the_quota,
    test_deleting_the_tenant_stops_its_workloads,
    test_launch_jupyter_creates_its_objects_in_the_tenant_namespace,
    test_logs_come_from_the_pod,
    test_stop_deletes_the_objects_and_keeps_the_record,
    test_the_home_volume_is_created_once_and_mounted,
    test_unicode_names_and_commands_are_kept_as_argv,
)

pytestmark = [pytest.mark.django_db, pytest.mark.realcluster, pytest.mark.timeout(180)]
