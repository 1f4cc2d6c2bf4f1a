"""MultiKueue as manifests: pure functions for a manager cluster that dispatches to workers.

The portal's own cluster is the manager: its Kueue admits a queued Job, JobSet or MPIJob against
the manager's ClusterQueue, then the MultiKueue admission check hands it to a worker cluster
whose Kueue admits it too, runs it there, mirrors its status back onto the manager's object and
removes the worker's copy when it is done. What that takes (read from Kueue v0.19's v1beta2 API
and its MultiKueue controller):

On the manager, in Kueue's namespace and cluster-wide:
- per worker, a Secret with the worker's kubeconfig under the key `kubeconfig`. Kueue accepts
  only a self-contained one: the CA inline (`certificate-authority-data`, no file), a bearer
  token inline (no token file, no exec plugin, no basic auth), TLS verified;
- per worker, a `MultiKueueCluster` naming that Secret (`clusterSource.kubeConfig`);
- one `MultiKueueConfig` listing the workers (in order of preference);
- one `AdmissionCheck` whose controller is `kueue.x-k8s.io/multikueue`, its parameters that
  config;
- on every ClusterQueue that dispatches, the check in `admissionChecksStrategy` (for all its
  flavors: MultiKueue refuses a check applied per flavor).
A Job created in such a queue gets `spec.managedBy: kueue.x-k8s.io/multikueue` from Kueue's
webhook, so the manager's Job controller leaves it alone (an MPIJob: `spec.runPolicy.managedBy`).

On each worker:
- the tenant's namespace and a LocalQueue of the same name as the manager's, in a ClusterQueue
  with quota for what the worker has (tenants/kueue.py makes both, per cluster);
- an identity for the manager's Kueue: a ServiceAccount bound to a ClusterRole with what
  MultiKueue does there (Workloads and their status, the dispatched kinds, reading the queues),
  nothing more; its token goes into the manager's Secret.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import yaml

from .labels import KUEUE_API_VERSION, MANAGED_BY

CONTROLLER = "kueue.x-k8s.io/multikueue"
KUEUE_NAMESPACE = "kueue-system"
ADMISSION_CHECK = "gpu-portal-multikueue"
CONFIG = "gpu-portal-multikueue"
SECRET_KEY = "kubeconfig"  # the key Kueue reads the kubeconfig from
TOKEN_EXPIRES = "gpu-portal.io/token-expires"  # the Secret's annotation: when its token expires
# the manager's identity on a worker
WORKER_NAMESPACE = KUEUE_NAMESPACE
WORKER_SERVICE_ACCOUNT = "gpu-portal-multikueue"
WORKER_ROLE = "gpu-portal-multikueue"
# the portal's own identity on a worker (deploy/base/portal-rbac.yaml there), which asks for
# that ServiceAccount's tokens when an admin registers the worker (clusters/dispatch.py)
PORTAL_NAMESPACE = "gpu-portal"
PORTAL_SERVICE_ACCOUNT = "gpu-portal"
TOKEN_ROLE = "gpu-portal-multikueue-token"

_RESOURCE_VERBS = ["create", "update", "patch", "delete", "get", "list", "watch"]
# per Kueue framework with a MultiKueue adapter: the (API group, resource) its copies on a
# worker are. The manager's Kueue watches every enabled framework's kind on each worker when it
# connects, and calls the worker unreachable if one is forbidden: the pod integration (the
# portal's services) counts, although the portal dispatches only batch-shaped work
DISPATCHED = {"batch/job": ("batch", "jobs"),
              "pod": ("", "pods"),
              "jobset.x-k8s.io/jobset": ("jobset.x-k8s.io", "jobsets"),
              "kubeflow.org/mpijob": ("kubeflow.org", "mpijobs")}


def _meta(name: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": dict(MANAGED_BY)}
    if namespace:
        meta["namespace"] = namespace
    return meta


def check_name(cluster: str) -> str:
    """The AdmissionCheck (and its MultiKueueConfig) that dispatches to worker `cluster` only:
    the check of the ClusterQueues a launch pinned to that worker is queued in."""
    return f"{ADMISSION_CHECK}-{cluster}"


def local_queue_name(cluster: str) -> str:
    """The tenants' LocalQueue dispatching to worker `cluster` (tenants/kueue.py makes it)."""
    return f"gpu-portal-{cluster}"


def secret_name(cluster: str) -> str:
    """The Secret in Kueue's namespace holding worker `cluster`'s kubeconfig."""
    return f"multikueue-{cluster}"


# --- on the manager ---------------------------------------------------------------------------


def make_kubeconfig(*, cluster: str, server: str, ca_pem: bytes, token: str) -> str:
    """A worker's kubeconfig as Kueue accepts it: CA and token inline, nothing read from files."""
    user = f"{WORKER_SERVICE_ACCOUNT}@{cluster}"
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": cluster, "cluster": {
            "server": server,
            "certificate-authority-data": base64.b64encode(ca_pem).decode()}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": user}}],
        "current-context": cluster,
    }, sort_keys=False)


def make_kubeconfig_secret(cluster: str, kubeconfig: str, *,
                           expires: str | None = None) -> dict[str, Any]:
    """`expires`: when its token expires (ISO 8601), kept as an annotation for its renewal."""
    meta = _meta(secret_name(cluster), KUEUE_NAMESPACE)
    if expires:
        meta["annotations"] = {TOKEN_EXPIRES: expires}
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": meta,
            "data": {SECRET_KEY: base64.b64encode(kubeconfig.encode()).decode()}}


def make_cluster(cluster: str) -> dict[str, Any]:
    return {"apiVersion": KUEUE_API_VERSION, "kind": "MultiKueueCluster",
            "metadata": _meta(cluster),
            "spec": {"clusterSource": {"kubeConfig": {
                "locationType": "Secret", "location": secret_name(cluster)}}}}


def make_config(clusters: Sequence[str], name: str = CONFIG) -> dict[str, Any]:
    """The workers, most preferred first (at least one: Kueue requires it)."""
    if not clusters:
        raise ValueError("a MultiKueueConfig lists at least one worker cluster")
    return {"apiVersion": KUEUE_API_VERSION, "kind": "MultiKueueConfig",
            "metadata": _meta(name), "spec": {"clusters": list(clusters)}}


def make_admission_check(name: str = ADMISSION_CHECK, config: str = CONFIG) -> dict[str, Any]:
    return {"apiVersion": KUEUE_API_VERSION, "kind": "AdmissionCheck",
            "metadata": _meta(name),
            "spec": {"controllerName": CONTROLLER, "parameters": {
                "apiGroup": KUEUE_API_VERSION.split("/")[0], "kind": "MultiKueueConfig",
                "name": config}}}


def make_manager_objects(clusters: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """Everything the manager needs for the workers (name, kubeconfig), in the order to apply:
    the Secrets before the MultiKueueClusters that name them, the configs, the checks: one
    over every worker (MultiKueue picks one with room), and one per worker listing it alone
    (what a launch that names the worker is dispatched through)."""
    names = [name for name, _ in clusters]
    objects = [make_kubeconfig_secret(name, kubeconfig) for name, kubeconfig in clusters]
    objects += [make_cluster(name) for name in names]
    objects += [make_config(names), make_admission_check()]
    for name in names:
        objects += [make_config([name], check_name(name)),
                    make_admission_check(check_name(name), check_name(name))]
    return objects


def with_admission_check(cluster_queue: dict[str, Any],
                         check: str = ADMISSION_CHECK) -> dict[str, Any]:
    """A copy of a ClusterQueue manifest (tenants/kueue.py make_cluster_queue) that dispatches
    its workloads through MultiKueue: the check for every flavor."""
    spec = {**cluster_queue["spec"], "admissionChecksStrategy": {
        "admissionChecks": [{"name": check}]}}
    return {**cluster_queue, "spec": spec}


# --- on a worker ------------------------------------------------------------------------------


def worker_rules(frameworks: Sequence[str] = tuple(DISPATCHED)) -> list[dict[str, Any]]:
    """What MultiKueue does on a worker: make, watch and remove the Workloads and the copies of
    the kinds of the manager's enabled `frameworks`, patch the Workloads' status, read the
    queues (it watches them to retry dispatching when a worker's queue changes). Kueue's own
    end-to-end tests give their worker identity these rules."""
    rules = [
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"],
         "verbs": list(_RESOURCE_VERBS)},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads/status"],
         "verbs": ["get", "patch", "update"]},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues", "localqueues"],
         "verbs": ["get", "list", "watch"]},
    ]
    for framework in frameworks:
        group, resource = DISPATCHED[framework]
        rules += [{"apiGroups": [group], "resources": [resource], "verbs": list(_RESOURCE_VERBS)},
                  {"apiGroups": [group], "resources": [f"{resource}/status"], "verbs": ["get"]}]
    return rules


def make_worker_identity(frameworks: Sequence[str] = tuple(DISPATCHED)) -> list[dict[str, Any]]:
    """The manager's ServiceAccount on a worker, its ClusterRole and the binding (the namespace,
    Kueue's, exists wherever Kueue runs); and a Role letting the portal's own ServiceAccount
    there ask for that ServiceAccount's tokens, and nothing else (the manager's kubeconfig is
    made from one when an admin registers the worker)."""
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": _meta(WORKER_SERVICE_ACCOUNT, WORKER_NAMESPACE)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": _meta(WORKER_ROLE), "rules": worker_rules(frameworks)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": _meta(WORKER_ROLE),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": WORKER_ROLE},
         "subjects": [{"kind": "ServiceAccount", "name": WORKER_SERVICE_ACCOUNT,
                       "namespace": WORKER_NAMESPACE}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": _meta(TOKEN_ROLE, WORKER_NAMESPACE),
         "rules": [{"apiGroups": [""], "resources": ["serviceaccounts/token"],
                    "resourceNames": [WORKER_SERVICE_ACCOUNT], "verbs": ["create"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": _meta(TOKEN_ROLE, WORKER_NAMESPACE),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                     "name": TOKEN_ROLE},
         "subjects": [{"kind": "ServiceAccount", "name": PORTAL_SERVICE_ACCOUNT,
                       "namespace": PORTAL_NAMESPACE}]},
    ]
