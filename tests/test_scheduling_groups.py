"""Which group a test goes with under `make test` (tests/fixtures/scheduling.py): each real
control plane's tests run in one process, which alone starts it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.fixtures.scheduling import KUEUE_GROUP, MULTI_GROUP, REAL_GROUP, group_of


@pytest.mark.parametrize(("fixtures", "group"), [
    (("real_cluster",), REAL_GROUP),
    (("kueue_cluster", "real_cluster"), KUEUE_GROUP),
    (("multi_cluster", "tenant_queue"), MULTI_GROUP),
    (("db",), None),
])
def test_a_test_goes_with_the_control_plane_it_uses(fixtures, group):
    item = SimpleNamespace(nodeid="tests/x/test_y.py::test_z", fixturenames=list(fixtures))
    assert group_of(item) == group  # type: ignore[arg-type]
