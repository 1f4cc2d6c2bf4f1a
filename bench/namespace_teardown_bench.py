#!/usr/bin/env python
"""How long a test's namespace takes to go on the real control plane, two ways.

    .venv/bin/python bench/namespace_teardown_bench.py [--repeats 2]

A bare `ControlPlane` (stack/k8s/cluster.py, no addons, the tests' pod timings) is started; then,
`--repeats` times each, a namespace is made — empty, or with a Deployment whose pod is Running,
an unbound claim and a Service — and deleted until the API server answers 404 for it:

- **controller**: its pods deleted, then the namespace, left to kube-controller-manager's
  namespace controller (what the tests' teardowns did before);
- **teardown**: `tests.support.cluster.namespace_deleted` (every collection in it deleted and
  waited for, then the namespace finalized).

Each line says the seconds and that nothing of the namespace (pods, claims) was left.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kubernetes import client as k8s  # noqa: E402

from kube.client import Kube  # noqa: E402
from stack.k8s.cluster import ControlPlane  # noqa: E402
from tests.support.cluster import namespace_deleted, namespace_gone  # noqa: E402
from tests.support.waiting import eventually  # noqa: E402


def fill(kube: Kube, core: k8s.CoreV1Api, namespace: str, content: bool) -> None:
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    if not content:
        return
    labels = {"app": "d"}
    kube.create({"apiVersion": "apps/v1", "kind": "Deployment",
                 "metadata": {"name": "d", "namespace": namespace},
                 "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                          "template": {"metadata": {"labels": labels},
                                       "spec": {"containers": [{"name": "c", "image": "x"}]}}}})
    kube.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                 "metadata": {"name": "c", "namespace": namespace},
                 "spec": {"accessModes": ["ReadWriteOnce"],
                          "resources": {"requests": {"storage": "1Gi"}}}})
    kube.create({"apiVersion": "v1", "kind": "Service",
                 "metadata": {"name": "s", "namespace": namespace},
                 "spec": {"ports": [{"port": 80}], "selector": labels}})
    eventually(lambda: [p for p in core.list_namespaced_pod(namespace).items
                        if p.status.phase == "Running"], timeout=60, message="a Running pod")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    cp = ControlPlane(Path(tempfile.mkdtemp(prefix="namespace-bench-")),
                      pod_start_seconds=0.2, default_run_seconds=1.0)
    started = time.monotonic()
    cp.start()
    print(f"control plane started in {time.monotonic() - started:.1f} s", flush=True)
    try:
        with cp.api_client() as api:
            core, kube = k8s.CoreV1Api(api), Kube(api)

            def controller(namespace: str) -> None:
                for pod in kube.list("Pod", namespace)["items"]:
                    kube.delete("Pod", pod["metadata"]["name"], namespace)
                core.delete_namespace(namespace)
                namespace_gone(core, namespace)

            def teardown(namespace: str) -> None:
                namespace_deleted(api, namespace)

            for content in (False, True):
                for _ in range(args.repeats):
                    for way, delete in (("controller", controller), ("teardown", teardown)):
                        namespace = f"b-{uuid.uuid4().hex[:8]}"
                        fill(kube, core, namespace, content)
                        began = time.monotonic()
                        delete(namespace)
                        took = time.monotonic() - began
                        left = (len(core.list_namespaced_pod(namespace).items)
                                + len(core.list_namespaced_persistent_volume_claim(namespace)
                                      .items))
                        what = "pod+claim+service" if content else "empty"
                        print(f"{what:18} {way:10} {took:6.2f} s  left {left}", flush=True)
    finally:
        cp.stop()


if __name__ == "__main__":
    main()
