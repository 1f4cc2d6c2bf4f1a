"""Pure make_* functions for a project's file server (filesd/: gpu-portal-files): a Secret
holding its bearer token, a Deployment of one pod that mounts the project's claims at
/volumes/<claim> (read-only where asked), and a ClusterIP Service the portal reaches it by.

The pod is labelled exposed and serves on its port "http": the tenant's network policies
(tenants/manifests.py) admit the portal to that port and nothing else, as they admit the
gateway to a workload's proxy. Nothing reaches the volumes through it without the token,
which only the portal (and the pod, from the Secret) knows.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

from kube.labels import (
    LABEL_EXPOSED,
    LABEL_NAME,
    LABEL_PROJECT_ID,
    MANAGED_BY,
    label_value,
)

Manifest = dict[str, Any]

NAME = "gpu-portal-files"  # the Secret's, the Deployment's and the Service's
PORT = 8080
PORT_NAME = "http"  # the port the tenant's network policy opens on an exposed pod
ROOT = "/volumes"
TOKEN_KEY = "token"
TOKEN_DIR = "/etc/gpu-portal-files"
# on the Deployment: the digest of what it was made from (its claims, image, limits), so that
# the portal sees at a glance whether it is the one it wants
ANNOTATION_SPEC = "gpu-portal.io/files-spec"
SELECTOR = {**MANAGED_BY, LABEL_NAME: NAME}
# the label selector of every project's file server objects
SELECTOR_TEXT = ",".join(f"{key}={value}" for key, value in SELECTOR.items())


@dataclasses.dataclass(frozen=True)
class ClaimMount:
    claim: str
    read_only: bool = False


@dataclasses.dataclass(frozen=True)
class FileServerSpec:
    namespace: str
    project_id: str
    claims: tuple[ClaimMount, ...]
    image: str
    token: str
    run_as_user: int
    max_upload_bytes: int
    cpu: str = "1"
    memory: str = "256Mi"

    def __post_init__(self) -> None:
        names = [mount.claim for mount in self.claims]
        if len(set(names)) != len(names):
            raise ValueError(f"a claim mounted twice: {names}")
        if not self.token:
            raise ValueError("the file server needs a token")

    def digest(self) -> str:
        """What the Deployment is made from, less the token (which it reads from the Secret)."""
        fields = dataclasses.asdict(self)
        fields.pop("token")
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


def labels(spec: FileServerSpec) -> dict[str, str]:
    return {**SELECTOR, LABEL_PROJECT_ID: label_value(spec.project_id)}


def _metadata(spec: FileServerSpec) -> Manifest:
    return {"name": NAME, "namespace": spec.namespace, "labels": labels(spec)}


def volume_name(index: int) -> str:
    """A pod volume's name: claim names may be longer than the 63 characters volumes allow."""
    return f"claim-{index}"


def make_secret(spec: FileServerSpec) -> Manifest:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": _metadata(spec),
            "type": "Opaque", "stringData": {TOKEN_KEY: spec.token}}


def make_deployment(spec: FileServerSpec) -> Manifest:
    """One pod, replaced by Recreate: a claim that is ReadWriteOnce is never wanted by two."""
    metadata = _metadata(spec)
    metadata["annotations"] = {ANNOTATION_SPEC: spec.digest()}
    pod_labels = {**labels(spec), LABEL_EXPOSED: "true"}
    mounts = [{"name": volume_name(i), "mountPath": f"{ROOT}/{mount.claim}",
               "readOnly": mount.read_only} for i, mount in enumerate(spec.claims)]
    volumes = [{"name": volume_name(i), "persistentVolumeClaim": {
        "claimName": mount.claim, "readOnly": mount.read_only}}
        for i, mount in enumerate(spec.claims)]
    container: Manifest = {
        "name": "files",
        "image": spec.image,
        "args": ["--listen", f":{PORT}", "--root", ROOT,
                 "--token-file", f"{TOKEN_DIR}/{TOKEN_KEY}",
                 "--max-upload-bytes", str(spec.max_upload_bytes)],
        "ports": [{"name": PORT_NAME, "containerPort": PORT, "protocol": "TCP"}],
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": PORT_NAME},
                           "periodSeconds": 2},
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"},
                      "limits": {"cpu": spec.cpu, "memory": spec.memory}},
        "securityContext": {"allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]},
                            "readOnlyRootFilesystem": True},
        "volumeMounts": [{"name": "token", "mountPath": TOKEN_DIR, "readOnly": True}, *mounts],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": {
            "replicas": 1,
            "revisionHistoryLimit": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": SELECTOR},
            "template": {
                "metadata": {"labels": pod_labels,
                             "annotations": {ANNOTATION_SPEC: spec.digest()}},
                "spec": {
                    "automountServiceAccountToken": False,  # no business with the API
                    "enableServiceLinks": False,
                    # SIGTERM: the server lets the transfers under way finish (filesd/main.go)
                    "terminationGracePeriodSeconds": 30,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": spec.run_as_user,
                        "runAsGroup": spec.run_as_user,
                        # the workloads' user's group owns the volumes (workloads/manifests.py)
                        "fsGroup": spec.run_as_user,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [container],
                    "volumes": [{"name": "token", "secret": {
                        "secretName": NAME, "defaultMode": 0o440,
                        "items": [{"key": TOKEN_KEY, "path": TOKEN_KEY}]}}, *volumes],
                },
            },
        },
    }


def make_service(spec: FileServerSpec) -> Manifest:
    return {"apiVersion": "v1", "kind": "Service", "metadata": _metadata(spec),
            "spec": {"type": "ClusterIP", "selector": SELECTOR,
                     "ports": [{"name": PORT_NAME, "protocol": "TCP", "port": PORT,
                                "targetPort": PORT_NAME}]}}


def file_server_objects(spec: FileServerSpec) -> list[Manifest]:
    """In creation order: the Secret the pod reads its token from first."""
    return [make_secret(spec), make_deployment(spec), make_service(spec)]
