"""tests/support/cluster.py's `cluster_objects_of_the_test`: what a test made is gone at its end
(a namespace of its own, a claim in a namespace it shares), what was there before it stays."""

import uuid

from kube.client import Kube
from tests.support.cluster import cluster_objects_of_the_test, names_of, namespaced_names_of


def claim(name: str, namespace: str) -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "1Gi"}}}}


def test_what_a_test_made_is_gone_and_what_was_there_stays(kubesim):
    shared, own = f"shared-{uuid.uuid4().hex[:6]}", f"own-{uuid.uuid4().hex[:6]}"
    with kubesim.api_client() as api:
        kube = Kube(api)
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": shared}})
        kube.create(claim("before", shared))
        with cluster_objects_of_the_test(kubesim.api_client, timeout=30):
            kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": own}})
            kube.create(claim("during", shared))
            assert (shared, "during") in namespaced_names_of(kube, "PersistentVolumeClaim")
        claims = namespaced_names_of(kube, "PersistentVolumeClaim")
        assert (shared, "before") in claims and (shared, "during") not in claims
        assert own not in names_of(kube, "Namespace") and shared in names_of(kube, "Namespace")
        kube.delete("Namespace", shared)
