"""ServiceAccounts: the controller that makes `default` in every namespace, and the
ServiceAccount admission plugin for pods.

- Controller (kube-controller-manager's serviceaccount-controller): `default` is made when a
  namespace appears and again when someone deletes it.
- Admission (the API server's ServiceAccount plugin): a pod's ServiceAccount must exist
  (403 `error looking up service account ns/x: serviceaccount "x" not found`), and unless the
  pod or its ServiceAccount turns automounting off, the pod gets the projected token volume
  `kube-api-access-xxxxx` mounted at /var/run/secrets/kubernetes.io/serviceaccount in every
  container. One leniency: a real API server refuses pods in the moment between a
  namespace's creation and its `default` ServiceAccount's; kubesim lets them through.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from kubesim.errors import ApiError, forbidden
from kubesim.resources import Obj, ResourceType, by_kind
from kubesim.store import AdmissionHook

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

NAMESPACE = by_kind("Namespace")
POD = by_kind("Pod")
SERVICE_ACCOUNT = by_kind("ServiceAccount")
DEFAULT = "default"
TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def token_volume(name: str) -> Obj:
    """The projected volume the ServiceAccount admission plugin adds (a bound token, the
    cluster's CA bundle and the pod's namespace)."""
    return {"name": name, "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt",
                       "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
            "apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
    ]}}


class ServiceAccountsController:
    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.queue = cluster.make_queue("serviceaccounts", self.reconcile)
        self._rand = random.Random()

    # ------------------------------------------------------------------ admission

    def admission_hooks(self) -> list[AdmissionHook]:
        return [self.admit_pod]

    def admit_pod(self, op: str, rt: ResourceType, new: Obj, old: Obj | None) -> None:
        if op != "CREATE" or rt is not POD:
            return
        spec = new.get("spec")
        if not isinstance(spec, dict):
            return
        meta = new["metadata"]
        ns = meta.get("namespace", "")
        name = spec.get("serviceAccountName") or DEFAULT
        sa = self.cluster.peek(SERVICE_ACCOUNT, ns, name)
        if sa is None and name != DEFAULT:
            raise forbidden(POD, meta.get("name", ""),
                            f"error looking up service account {ns}/{name}: "
                            f'serviceaccount "{name}" not found')
        automount = spec.get("automountServiceAccountToken")
        if automount is None:
            automount = (sa or {}).get("automountServiceAccountToken")
        if automount is False:
            return
        containers = [c for field in ("initContainers", "containers")
                      for c in spec.get(field) or () if isinstance(c, dict)]
        if any(m.get("mountPath") == TOKEN_PATH for c in containers
               for m in c.get("volumeMounts") or () if isinstance(m, dict)):
            return
        volume = "kube-api-access-" + "".join(self._rand.choice(_NAME_ALPHABET)
                                              for _ in range(5))
        spec.setdefault("volumes", []).append(token_volume(volume))
        for c in containers:
            c.setdefault("volumeMounts", []).append(
                {"name": volume, "readOnly": True, "mountPath": TOKEN_PATH})

    # ------------------------------------------------------------------ controller

    def on_namespace(self, event: str, ns: Obj) -> None:
        if event != "DELETED" and not ns["metadata"].get("deletionTimestamp"):
            self.queue.add(ns["metadata"]["name"])

    def on_service_account(self, event: str, sa: Obj) -> None:
        if event == "DELETED" and sa["metadata"]["name"] == DEFAULT:
            self.queue.add(sa["metadata"]["namespace"])

    def reconcile(self, namespace: str) -> None:
        ns = self.cluster.peek(NAMESPACE, None, namespace)
        if ns is None or ns["metadata"].get("deletionTimestamp"):
            return
        if self.cluster.peek(SERVICE_ACCOUNT, namespace, DEFAULT) is not None:
            return
        try:
            self.cluster.store.create(SERVICE_ACCOUNT, {
                "apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": DEFAULT, "namespace": namespace}})
        except ApiError as exc:
            # 409: made meanwhile; 403: the namespace started terminating
            if exc.code not in (403, 409):
                raise
