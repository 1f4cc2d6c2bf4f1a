"""tests/support/cluster.py's `namespace_deleted` on the real control plane: it finalizes a test's
namespace itself, without the namespace controller's wait, so it must not do so before the
namespace is empty — an object a finalizer holds is waited for, and nothing of the namespace is
left behind once it is gone."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from kube.client import Kube
from tests.support.cluster import api_request, namespace_deleted, namespaced_collections
from tests.support.waiting import eventually

pytestmark = pytest.mark.realcluster

HOLD = "tests.gpu-portal.io/hold"


def test_a_namespace_goes_only_once_empty_and_leaves_nothing(real_cluster):
    name = f"t-{uuid.uuid4().hex[:10]}"
    with real_cluster.api_client() as api:
        kube = Kube(api)
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        kube.create({"apiVersion": "v1", "kind": "Secret",
                     "metadata": {"name": "held", "namespace": name, "finalizers": [HOLD]}})
        kube.create({"apiVersion": "apps/v1", "kind": "Deployment",
                     "metadata": {"name": "d", "namespace": name},
                     "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}},
                              "template": {"metadata": {"labels": {"app": "d"}},
                                           "spec": {"containers": [{"name": "c",
                                                                    "image": "x"}]}}}})
        kube.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                     "metadata": {"name": "claim", "namespace": name},
                     "spec": {"accessModes": ["ReadWriteOnce"],
                              "resources": {"requests": {"storage": "1Gi"}}}})
        eventually(lambda: kube.list("Pod", name)["items"], timeout=30,
                   message="the Deployment's pod")
        released: list[float] = []

        def release() -> None:
            """Let the held Secret go only once everything else of the namespace is gone: all
            that while, the namespace must stay."""
            eventually(lambda: (kube.get("Secret", "held", name) or {})
                       .get("metadata", {}).get("deletionTimestamp"), timeout=30,
                       message="the held Secret marked deleted")
            eventually(lambda: not kube.list("Pod", name)["items"]
                       and not kube.list("Deployment", name)["items"]
                       and not kube.list("PersistentVolumeClaim", name)["items"],
                       timeout=30, message="the rest of the namespace gone")
            assert kube.get("Namespace", name) is not None
            released.append(time.monotonic())
            kube.patch("Secret", "held", {"metadata": {"finalizers": None}}, name)

        releaser = threading.Thread(target=release)
        releaser.start()
        namespace_deleted(api, name, timeout=60)
        gone_at = time.monotonic()
        releaser.join()
        assert released and released[0] < gone_at
        assert kube.get("Namespace", name) is None
        assert [path for path in namespaced_collections(api)
                if (api_request(api, "GET", path.format(name)) or {}).get("items")] == []
