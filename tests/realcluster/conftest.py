"""The portal's journeys on the real control plane (tests/fixtures/realcluster.py).

`cluster` is overridden here: the portal talks to the real API server as its own least-privilege
ServiceAccount (portal.kubeconfig, deploy/base/portal-rbac.yaml), never as an admin; the test's own
checks and clean-up use the admin kubeconfig. Test modules here re-run suites written for kubesim
(imported by name, so the same assertions hold on both) and add what only a real cluster shows.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from stack.k8s.addons import addon
from stack.k8s.cluster import ControlPlane
from tests.support.cluster import cluster_objects_of_the_test


class PortalView:
    """The real cluster as the kubesim-era tests see a cluster: `.kubeconfig` is what the portal
    uses (its ServiceAccount), `.api_client()` is the test's admin client."""

    def __init__(self, cp: ControlPlane) -> None:
        self.cp = cp
        self.kubeconfig = str(cp.portal_kubeconfig)
        self.url = cp.url
        self.running = True

    def api_client(self):
        return self.cp.api_client()


@pytest.fixture
def cluster(real_cluster: ControlPlane, settings) -> Iterator[PortalView]:
    from cluster.addresses import address_pools_forget

    settings.KUBECONFIG = str(real_cluster.portal_kubeconfig)
    address_pools_forget()  # what free addresses an earlier test left is not this one's
    # the GPU agents of the KWOK nodes, as `make demo CLUSTER=kube` passes them to the portal
    settings.PORTAL_GPU_EXPORTER_URLS = list(addon(real_cluster, "gpumetrics").urls)
    # the next test counts free GPUs on this same cluster: this one's pods must be gone
    with cluster_objects_of_the_test(real_cluster.api_client, timeout=90):
        yield PortalView(real_cluster)
