"""The MPI operator for the real control plane, run out of cluster, as an addon.

The MPI operator (github.com/kubeflow/mpi-operator, built by stack/k8s/build.py as
`mpi-operator`) runs MPIJobs (kubeflow.org/v2beta1): for each, the worker pods, a headless
Service for their names, a ConfigMap with the hostfile, a Secret with the SSH keys, and the
launcher as a batch Job that runs `mpirun` over them; the MPIJob succeeds or fails with its
launcher. Kueue admits an MPIJob whole (its `kubeflow.org/mpijob` integration,
stack/k8s/kueue.py). What running it outside a cluster takes (read from its cmd/mpi-operator and
manifests/base):

- its CRD (manifests/base/kubeflow.org_mpijobs.yaml, read from the Go module cache); it has no
  webhooks;
- `-kubeConfig`; it always elects a leader, with a Lease in `-lock-namespace` (mpi-operator,
  made here); `-namespace` unset: it watches every namespace;
- its /healthz on a free port (`-health-port`, a flag of this repository's wrapper: upstream's
  port is fixed at 8080 on every interface, stack/k8s/mpi-operator/main.go);
- a higher client rate than its defaults (5 requests/s, bursts of 10), which make it create a
  job's objects one by one, seconds apart.

Identity: the ServiceAccount mpi-operator/mpi-operator bound to its upstream ClusterRole
(manifests/base/cluster-role.yaml, `mpi-operator`), with a TokenRequest token: the least
privilege upstream gives it, not an administrator's certificate. The ClusterRoles it ships for
users (kubeflow-mpijobs-admin/edit/view) are not installed: the portal has its own
(deploy/base/portal-rbac.yaml).
"""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ..procs import free_port, http_ok, stop
from . import build

if TYPE_CHECKING:
    from .cluster import ControlPlane

NAMESPACE = "mpi-operator"
SERVICE_ACCOUNT = "mpi-operator"
CLUSTER_ROLE = "mpi-operator"
GROUP = "kubeflow.org"


def operator_rbac(folder: Path, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    """Its ServiceAccount, ClusterRole and ClusterRoleBinding from manifests/base."""
    base = folder / "manifests" / "base"
    docs = []
    for name in ("service-account.yaml", "cluster-role.yaml", "cluster-role-binding.yaml"):
        for doc in yaml.safe_load_all((base / name).read_text()):
            if not doc or doc["metadata"]["name"] not in (SERVICE_ACCOUNT, CLUSTER_ROLE):
                continue
            if doc["kind"] == "ServiceAccount":
                doc["metadata"]["namespace"] = namespace
            if "subjects" in doc:
                doc["subjects"] = [{**s, "namespace": namespace} for s in doc["subjects"]]
            docs.append(doc)
    return docs


def custom_resource_definitions(folder: Path) -> list[dict[str, Any]]:
    path = folder / "manifests" / "base" / "kubeflow.org_mpijobs.yaml"
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


class MPIOperator:
    """The Addon."""

    name = "mpi-operator"

    def __init__(self) -> None:
        self.version = build.COMPONENTS["mpi-operator"].version
        self.proc: subprocess.Popen[bytes] | None = None
        self.health_url = ""
        self.kubeconfig: Path | None = None
        self.cp: ControlPlane | None = None
        self.command: list[str] = []

    def apiserver_args(self, cp: ControlPlane) -> list[str]:
        return []

    def _leader(self, cp: ControlPlane) -> str | None:
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        with cp.api_client() as api:
            try:
                lease = client.CoordinationV1Api(api).read_namespaced_lease("mpi-operator",
                                                                            NAMESPACE)
            except ApiException as exc:
                if exc.status == 404:
                    return None
                raise
        return lease.spec.holder_identity if lease.spec else None

    def start(self, cp: ControlPlane) -> None:
        binary = build.ensure("mpi-operator")["mpi-operator"]
        folder = build.module_dir("mpi-operator")
        with cp.api_client() as api:
            build.apply_crds(api, custom_resource_definitions(folder), what="the MPI operator")
            build.apply_object(api, {"apiVersion": "v1", "kind": "Namespace",
                                     "metadata": {"name": NAMESPACE}})
            for doc in operator_rbac(folder):
                build.apply_object(api, doc)
        self.kubeconfig = cp.service_account_kubeconfig(cp.workdir / "mpi-operator.kubeconfig",
                                                        NAMESPACE, SERVICE_ACCOUNT)
        health_port = free_port()
        self.health_url = f"http://127.0.0.1:{health_port}/healthz"
        self.cp = cp
        self.command = [str(binary), f"-kubeConfig={self.kubeconfig}",
                        f"-lock-namespace={NAMESPACE}", f"-health-port={health_port}",
                        "-kube-api-qps=50", "-kube-api-burst=100"]
        self.start_process()

    def start_process(self) -> None:
        """Start the controller and wait until it leads (a Lease an earlier run left in a kept
        etcd is another's: waited out, as its 15 s lapse)."""
        cp = self.cp
        assert cp is not None
        before = self._leader(cp)

        def leading() -> bool:
            leader = self._leader(cp)
            return http_ok(self.health_url) and leader is not None and leader != before

        self.proc = build.start_controller(cp, "mpi-operator", self.command, leading, timeout=60)

    def restart_process(self) -> None:
        """Stop the controller and start it again as it was (its CRD, identity and token stay),
        its Lease deleted with it. The stopped one cannot renew it (a leader that lost its API
        server exits without releasing it), and a new candidate leads only once it has seen
        the Lease go unrenewed for its whole length (15 s from its first read): no MPIJob
        would be run meanwhile."""
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        assert self.cp is not None
        self.stop()
        with self.cp.api_client() as api:
            try:
                client.CoordinationV1Api(api).delete_namespaced_lease("mpi-operator", NAMESPACE)
            except ApiException as exc:
                if exc.status != 404:
                    raise
        self.start_process()

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            stop(self.proc)
        self.proc = None
