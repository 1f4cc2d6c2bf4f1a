"""The real control plane's dynamic provisioner, as an addon: gpu-portal-provisioner
(stack/k8s/provisioner/, our own small program on sig-storage-lib-external-provisioner, built
by stack/k8s/build.py as `provisioner`), run out of cluster.

A claim of the StorageClass it comes with (`standard`, the cluster's default, as the demo's
volumes name it) gets a folder `<root>/<namespace>/<volume>` under this cluster's folder and a
hostPath PersistentVolume naming it, bound by the PV controller; deleting the claim deletes the
volume and its folder (reclaim policy Delete). A site's equivalent is a provisioner of its
shared file system (docs/operator-guide.md).

The class binds at once (`volumeBindingMode: Immediate`): a volume is `bound` in the portal as
soon as it is made, before any workload mounts it, and its folder, on a file system every node
mounts, suits a group whose ranks run on several nodes. WaitForFirstConsumer would work on
KWOK's nodes as well (the scheduler names a node on the claim, and the library passes it on),
but the volume would wait `pending` until its first launch, and a folder tied to the first
consumer's node is what a `local` volume of one node's disks needs, not a shared file system.

No expansion (allowVolumeExpansion off): a folder has no size to grow, and the in-tree expand
controller leaves a hostPath volume to an external resizer that no site runs for folders
(stack/k8s/provisioner/main.go says more).

Identity: the ServiceAccount gpu-portal-storage/gpu-portal-provisioner bound to a ClusterRole
holding what the library reads and writes (as upstream provisioners' RBAC), with a TokenRequest
token: not an administrator's certificate.
"""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..procs import free_port, http_ok, stop
from . import build

if TYPE_CHECKING:
    from .cluster import ControlPlane

NAME = "gpu-portal.io/shared-folder"  # the program's default --name (main.go's DefaultName)
NAMESPACE = "gpu-portal-storage"
SERVICE_ACCOUNT = "gpu-portal-provisioner"
STORAGE_CLASS = "standard"
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"


def storage_class(name: str = STORAGE_CLASS) -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": name, "annotations": {DEFAULT_CLASS_ANNOTATION: "true"}},
            "provisioner": NAME, "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate",
            "allowVolumeExpansion": False}


def provisioner_rbac() -> list[dict[str, Any]]:
    """Its namespace, ServiceAccount, ClusterRole and binding."""
    rules = [
        {"apiGroups": [""], "resources": ["persistentvolumes"],
         "verbs": ["get", "list", "watch", "create", "delete"]},
        {"apiGroups": [""], "resources": ["persistentvolumeclaims"],
         "verbs": ["get", "list", "watch", "update"]},
        {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses"],
         "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"],
         "verbs": ["create", "update", "patch"]},
    ]
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": SERVICE_ACCOUNT, "namespace": NAMESPACE}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": SERVICE_ACCOUNT}, "rules": rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": SERVICE_ACCOUNT},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": SERVICE_ACCOUNT},
         "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT,
                       "namespace": NAMESPACE}]},
    ]


class SharedFolderProvisioner:
    """The Addon. `root` is where the volumes' folders are (a test reads them there)."""

    name = "provisioner"

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.root: Path | None = None
        self.health_url = ""

    def apiserver_args(self, cp: ControlPlane) -> list[str]:
        return []

    def start(self, cp: ControlPlane) -> None:
        binary = build.ensure("provisioner")["gpu-portal-provisioner"]
        self.root = cp.workdir / "volumes"
        with cp.api_client() as api:
            for doc in [*provisioner_rbac(), storage_class()]:
                build.apply_object(api, doc)
        kubeconfig = cp.service_account_kubeconfig(cp.workdir / "provisioner.kubeconfig",
                                                   NAMESPACE, SERVICE_ACCOUNT)
        health = f"127.0.0.1:{free_port()}"
        self.health_url = f"http://{health}/healthz"
        self.proc = build.start_controller(
            cp, "provisioner", [str(binary), f"--kubeconfig={kubeconfig}", f"--root={self.root}",
                                f"--name={NAME}", f"--health-address={health}"],
            lambda: http_ok(self.health_url), timeout=60)

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            stop(self.proc)
        self.proc = None
