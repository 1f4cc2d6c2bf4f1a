"""The real control plane stopped mid-run (kube-apiserver and etcd, until the portal's tasks have
retried four times), under the portal's real processes: the same fault test as on kubesim
(tests/faults/test_cluster_outage.py) — the banner on the pages, /readyz failing, tasks retrying
with backoff, and every workload's state matching the cluster once it is back."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kube.client import Kube
from stack.k8s.cluster import ControlPlane
from tests.faults.conftest import lab, portal_processes  # noqa: F401 - fixtures used here
from tests.faults.test_cluster_outage import (  # noqa: F401 - collected here
    test_a_cluster_outage_is_shown_retried_and_converges,
)
from tests.support.cluster import remove_workload_objects

pytestmark = [pytest.mark.realcluster, pytest.mark.timeout(500)]


class ControlPlaneOutage:
    """What tests/faults wants of its cluster (`kubeconfig`, `stop()`, `start()`), on the real
    control plane: the API server and etcd go down; they come back on the same port with the
    same data; the controller-manager and scheduler are restarted then, as leader election would
have them restart on a production control plane (KWOK stays up and reconnects by itself).

    They reconnect with client-go's backoff (up to 30 s a try), the restarted API server refuses
    them until its RBAC cache is filled, and the controller-manager will not act on a cache older
    than what it last wrote ("read version … is not as new as written version"). In a CI run of
    the whole suite (2 cores, two test processes) a Job created 30 s after the restart had its
    pod started 70 s later, so this cluster is given 180 s to converge where kubesim gets 90."""

    converge_seconds = 180

    def __init__(self, cp: ControlPlane) -> None:
        self.cp = cp
        self.kubeconfig = str(cp.portal_kubeconfig)
        self.url = cp.url

    def stop(self) -> None:
        self.cp.stop_component("kube-apiserver")
        self.cp.stop_component("etcd")

    def start(self) -> None:
        if not self.cp.running:
            self.cp.start_etcd()
            # its controllers started again as a production control plane's are after an
            # outage (leader election): left running, the controller-manager waited minutes on
            # caches its refused watches left stale ("read version … is not as new as written
            # version"): a Deployment's pod was Ready at once, its readyReplicas still 0 four
            # minutes later (fresh run 6)
            self.cp.resume_apiserver()


@pytest.fixture
def fault_cluster(real_cluster: ControlPlane, settings) -> Iterator[ControlPlaneOutage]:
    settings.KUBECONFIG = str(real_cluster.portal_kubeconfig)
    outage = ControlPlaneOutage(real_cluster)
    try:
        yield outage
    finally:
        outage.start()  # the session's cluster serves the tests after this one
        with real_cluster.api_client() as client:  # … with its GPUs free: this test's pods gone
            remove_workload_objects(Kube(client), wait=outage.converge_seconds)
