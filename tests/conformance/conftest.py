"""The conformance suite's fixtures: one `cluster` parametrized over kubesim and the real thing.

- `cluster` (params "kubesim" and "kube", through the session fixture `session_cluster`): a
  `Cluster` over the session fixture named in CLUSTER_FIXTURES (tests/fixtures/kubesim.py's
  `kubesim`, tests/fixtures/realcluster.py's `real_cluster`).
- `ns` (function): a fresh namespace on that cluster, with its `default` ServiceAccount
  (a real API server refuses pods until the controller-manager has made it).
- `@known_difference("why")` on a check: kubesim is known to behave otherwise. The kubesim
  run of that check becomes `xfail(strict=True)`: it must fail there (or the marker goes),
  and it must still pass on the real cluster.

The score (`N of M checks agree`) is counted from these markers by tests/conformance/score.py
and printed at the end of every run of this directory.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.conformance.cluster import Cluster, eventually
from tests.conformance.score import KNOWN_DIFFERENCE

# the parameter → the session fixture that starts that cluster
CLUSTER_FIXTURES = {"kubesim": "kubesim", "kube": "real_cluster"}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{KNOWN_DIFFERENCE}(reason): a conformance check kubesim is known to fail "
        "(xfail strict on the kubesim parameter)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is None or callspec.params.get("session_cluster") != "kubesim":
            continue
        marker = item.get_closest_marker(KNOWN_DIFFERENCE)
        if marker is not None:
            item.add_marker(pytest.mark.xfail(strict=True, reason=marker.kwargs["reason"]))


@pytest.fixture(scope="session", autouse=True)
def redis_server():
    """The clusters need no Redis: this shadows the portal stack's autouse Redis fixture."""
    return None


@pytest.fixture(scope="session", params=list(CLUSTER_FIXTURES))
def session_cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    backend = request.getfixturevalue(CLUSTER_FIXTURES[request.param])
    kubeconfig = getattr(backend, "admin_kubeconfig", None) or backend.kubeconfig
    the_cluster = Cluster(request.param, str(kubeconfig), backend)
    yield the_cluster
    the_cluster.close()


@pytest.fixture
def cluster(session_cluster: Cluster) -> Cluster:
    """The cluster of this run of the check, up (a fault test earlier in the session may have
    stopped the shared kubesim; kube_namespace restarts it the same way)."""
    backend = session_cluster.backend
    if session_cluster.name == "kubesim" and not backend.running:
        backend.start()
    return session_cluster


@pytest.fixture
def ns(cluster: Cluster) -> Iterator[str]:
    name = f"c-{uuid.uuid4().hex[:10]}"
    core = cluster.core
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(
        name=name, labels={"conformance": "true"})))
    # what the controllers write into every new namespace, before the test's own objects: a
    # watch or list of the test's must not see them arrive (kubesim publishes no root CA)
    eventually(lambda: core.read_namespaced_service_account("default", name), timeout=30,
               what=f"ServiceAccount {name}/default")
    if cluster.name == "kube":
        eventually(lambda: core.read_namespaced_config_map("kube-root-ca.crt", name),
                   timeout=30, what=f"ConfigMap {name}/kube-root-ca.crt")
    yield name
    with contextlib.suppress(ApiException):
        core.delete_namespace(name)
