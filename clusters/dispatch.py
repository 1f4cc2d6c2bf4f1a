"""The home cluster's MultiKueue objects for the portal's worker clusters, made from the
clusters an admin registered (docs/multicluster.md).

Every enabled cluster other than the home one is a worker of the home cluster's Kueue. For
each, on the home cluster (kube/multikueue.py's manifests): the Secret in Kueue's namespace
holding a self-contained kubeconfig of the manager's identity on the worker (its
ServiceAccount `kueue-system/gpu-portal-multikueue` there, a token from the TokenRequest API
asked through the portal's own identity on the worker, the CA the portal verifies the worker
with), its MultiKueueCluster, and its own MultiKueueConfig and AdmissionCheck (what the
tenants' queues pinned to the worker carry); besides them one config and check listing every
worker. A worker no longer enabled (disabled, removed) has all of them deleted, and with them
the tenants' ClusterQueues and LocalQueues that dispatched to it (the tenants' reconcile makes
those of the workers there are).

A worker that does not answer keeps the objects it has (Kueue reconnects by itself); its token
is renewed when half its life is gone, at the beat's sweep. Nothing is done where the home
cluster does not queue on Kueue."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from typing import Any

from django.utils import timezone

from kube import multikueue
from kube.client import Kube, KubeError
from kube.kueue import queueing_on
from kube.labels import MANAGED_BY_SELECTOR

from .selectors import dispatch_workers

log = logging.getLogger(__name__)

# how long the manager's token on a worker lasts (the worker's API server may cap it: its
# --service-account-max-token-expiration); renewed once half of it is gone
TOKEN_SECONDS = 7 * 24 * 3600


@dataclasses.dataclass
class DispatchResult:
    made: list[str] = dataclasses.field(default_factory=list)  # workers whose token is new
    kept: list[str] = dataclasses.field(default_factory=list)
    unreachable: dict[str, str] = dataclasses.field(default_factory=dict)
    removed: list[str] = dataclasses.field(default_factory=list)


def dispatch_reconcile(kube: Kube | None = None, *, now: dt.datetime | None = None
                       ) -> DispatchResult | None:
    """Make the home cluster's MultiKueue objects match the workers; None where the home
    cluster does not queue on Kueue. Raises KubeError when the home cluster does not answer."""
    kube = kube or Kube()
    if not queueing_on(kube):
        return None
    now = now or timezone.now()
    result = DispatchResult()
    workers = dispatch_workers()
    for name in workers:
        secret = kube.get("Secret", multikueue.secret_name(name), multikueue.KUEUE_NAMESPACE)
        if secret is not None and not _renew(secret, now):
            result.kept.append(name)
        else:
            try:
                kubeconfig, expires = _worker_kubeconfig(name, now)
            except KubeError as exc:
                result.unreachable[name] = str(exc)
                log.info("MultiKueue: worker %s not reached (%s): its objects stay", name, exc)
                if secret is None:
                    continue
            else:
                _apply(kube, multikueue.make_kubeconfig_secret(name, kubeconfig,
                                                               expires=expires))
                result.made.append(name)
        for obj in [multikueue.make_cluster(name),
                    multikueue.make_config([name], multikueue.check_name(name)),
                    multikueue.make_admission_check(multikueue.check_name(name),
                                                    multikueue.check_name(name))]:
            _apply(kube, obj)
    connected = [name for name in workers if name in result.made or name in result.kept]
    if connected:
        _apply(kube, multikueue.make_config(connected))
        _apply(kube, multikueue.make_admission_check())
    else:
        kube.delete("AdmissionCheck", multikueue.ADMISSION_CHECK)
        kube.delete("MultiKueueConfig", multikueue.CONFIG)
    for found in kube.list("MultiKueueCluster", label_selector=MANAGED_BY_SELECTOR)["items"]:
        name = found["metadata"]["name"]
        if name not in workers:
            _remove(kube, name)
            result.removed.append(name)
    return result


def _renew(secret: dict[str, Any], now: dt.datetime) -> bool:
    """Whether the Secret's token is past half its life (or its expiry is not known)."""
    expires = ((secret.get("metadata") or {}).get("annotations") or {}).get(multikueue.TOKEN_EXPIRES)
    try:
        until = dt.datetime.fromisoformat(expires) if expires else None
    except ValueError:
        until = None
    return until is None or until - now < dt.timedelta(seconds=TOKEN_SECONDS / 2)


def _worker_kubeconfig(name: str, now: dt.datetime) -> tuple[str, str]:
    """The manager's kubeconfig for worker `name` and when its token expires (ISO)."""
    worker = Kube(cluster=name)
    ca_pem = worker.ca_pem()
    if ca_pem is None:
        raise KubeError(f"the portal does not verify {name}'s API server with a CA of its own: "
                        "Kueue takes only a kubeconfig with the CA inline")
    token = worker.service_account_token(multikueue.WORKER_NAMESPACE,
                                         multikueue.WORKER_SERVICE_ACCOUNT, seconds=TOKEN_SECONDS)
    kubeconfig = multikueue.make_kubeconfig(cluster=name, server=worker.server, ca_pem=ca_pem,
                                            token=token)
    return kubeconfig, (now + dt.timedelta(seconds=TOKEN_SECONDS)).isoformat()


def _apply(kube: Kube, obj: dict[str, Any]) -> None:
    meta = obj["metadata"]
    current = kube.get(obj["kind"], meta["name"], meta.get("namespace"))
    if current is None:
        kube.create(obj)
        return
    wanted = {key: value for key, value in obj.items() if key not in ("apiVersion", "kind",
                                                                      "metadata")}
    if all(current.get(key) == value for key, value in wanted.items()) and \
            (current["metadata"].get("annotations") or {}) == (meta.get("annotations") or {}):
        return
    kube.replace({**obj, "metadata": {**meta, "resourceVersion":
                                      current["metadata"]["resourceVersion"]}})


def _remove(kube: Kube, name: str) -> None:
    """Worker `name`'s objects on the home cluster, and the tenants' queues dispatching to it."""
    check = multikueue.check_name(name)
    for queue in kube.list("ClusterQueue", label_selector=MANAGED_BY_SELECTOR)["items"]:
        checks = ((queue.get("spec") or {}).get("admissionChecksStrategy") or {}).get(
            "admissionChecks") or []
        if any(entry.get("name") == check for entry in checks):
            kube.delete("ClusterQueue", queue["metadata"]["name"])
    local = multikueue.local_queue_name(name)
    for queue in kube.list("LocalQueue", label_selector=MANAGED_BY_SELECTOR)["items"]:
        if queue["metadata"]["name"] == local:
            kube.delete("LocalQueue", local, queue["metadata"]["namespace"])
    kube.delete("AdmissionCheck", check)
    kube.delete("MultiKueueConfig", check)
    kube.delete("MultiKueueCluster", name)
    kube.delete("Secret", multikueue.secret_name(name), multikueue.KUEUE_NAMESPACE)
