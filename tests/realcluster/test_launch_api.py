"""The launch API's tests (tests/workloads/test_launch_api.py) on the real control plane: admission,
quota, roles and tenant isolation, capacity and free GPUs from the real nodes and the real
scheduler's bindings, stop and delete, the home volume, logs."""

import pytest

from tests.workloads.test_launch_api import (  # noqa: F401 - collected here, against the real cluster
    JUPYTER,
    as_user,
    test_a_launch_beyond_the_quota_is_403_naming_the_limit,
    test_a_request_that_can_never_fit_is_refused_at_once,
    test_another_tenant_is_404,
    test_bad_input_is_400_with_field_errors_and_creates_nothing,
    test_delete_hides_it_and_frees_the_quota,
    test_deleting_the_tenant_stops_its_workloads,
    test_disabled_template_and_gpu_type_are_refused,
    test_gpu_types_report_capacity_and_free,
    test_launch_jupyter_creates_its_objects_in_the_tenant_namespace,
    test_list_filters,
    test_logs_come_from_the_pod,
    test_lowering_a_quota_below_use_blocks_launches_but_stops_nothing,
    test_roles_reader_member_manager,
    test_stop_deletes_the_objects_and_keeps_the_record,
    test_the_home_volume_is_created_once_and_mounted,
    test_the_same_idempotency_key_returns_the_same_workload,
    test_the_same_user_in_another_project_token_cannot_see_it,
    test_the_total_and_workload_count_limits_hold,
    test_unicode_names_and_commands_are_kept_as_argv,
    vision,
)

pytestmark = [pytest.mark.django_db, pytest.mark.realcluster, pytest.mark.timeout(180)]
