"""The portal's journeys on the real control plane (tests/fixtures/realcluster.py).

`cluster` is overridden here: the portal talks to the real API server as its own least-privilege
ServiceAccount (portal.kubeconfig, deploy/base/portal-rbac.yaml), never as an admin; the test's own
checks and clean-up use the admin kubeconfig. Test modules here re-run suites written for kubesim
(imported by name, so the same assertions hold on both) and add what only a real cluster shows.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from stack.k8s.cluster import ControlPlane
from tests.support.cluster import PortalView, portal_on


@pytest.fixture
def cluster(real_cluster: ControlPlane, settings) -> Iterator[PortalView]:
    with portal_on(real_cluster, settings) as view:
        yield view
