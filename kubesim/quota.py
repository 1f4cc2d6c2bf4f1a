"""ResourceQuota and LimitRange admission, and the quota controller that keeps status current.

Admission follows the real plugin (apiserver `resourcequota/controller.go`): for each quota in
the namespace, the resources it limits (`status.hard`, or `spec.hard` before its status is
filled) that the new object uses are added to the quota's usage; anything over the limit is
refused with `exceeded quota: NAME, requested: k=v, used: k=v, limited: k=v` (only the
exceeded resources, sorted). A quota that tracks a resource but has no `status.used` for it
refuses with `status unknown for quota: NAME, resources: …`. Quotas on cpu/memory require
each container to state them (`must specify …`), after LimitRange defaults are applied.

Usage is tracked in memory from store events (per pod, per namespace), so admission costs
O(quotas) and never lists pods; the controller writes `status.used` when it changes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kubesim.errors import forbidden
from kubesim.quantity import Quantity
from kubesim.resources import Obj, ResourceType, by_kind
from kubesim.scheduler import is_terminal

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

POD = by_kind("Pod")
SERVICE = by_kind("Service")
CLAIM = by_kind("PersistentVolumeClaim")
CLASS_STORAGE = ".storageclass.storage.k8s.io/requests.storage"
CLASS_CLAIMS = ".storageclass.storage.k8s.io/persistentvolumeclaims"
QUOTA = by_kind("ResourceQuota")
LIMITRANGE = by_kind("LimitRange")

Usage = dict[str, Quantity]

# Resources whose presence on every container a cpu/memory quota insists on.
_VALIDATION = ("requests.cpu", "requests.memory", "limits.cpu", "limits.memory", "cpu", "memory")
# Old-style object count names the quota system still accepts.
_LEGACY_COUNTS = {
    "services": "services", "secrets": "secrets", "configmaps": "configmaps",
    "persistentvolumeclaims": "persistentvolumeclaims", "resourcequotas": "resourcequotas",
    "replicationcontrollers": "replicationcontrollers",
}


def count_name(rt: ResourceType) -> str:
    return f"count/{rt.plural}" if not rt.group else f"count/{rt.plural}.{rt.group}"


def _container_totals(containers: list[Obj], field: str) -> dict[str, Quantity]:
    total: dict[str, Quantity] = {}
    for container in containers:
        values = ((container.get("resources") or {}).get(field)) or {}
        for name, raw in values.items():
            try:
                q = Quantity.parse(raw)
            except ValueError:
                continue
            total[name] = total[name] + q if name in total else q
    return total


def _pod_side(spec: Obj, field: str) -> dict[str, Quantity]:
    """Sum over containers, at least the largest init container (the effective request)."""
    total = _container_totals(spec.get("containers") or [], field)
    for init in spec.get("initContainers") or []:
        for name, q in _container_totals([init], field).items():
            if name not in total or total[name] < q:
                total[name] = q
    return total


def pod_usage(pod: Obj) -> Usage:
    """What a pod counts against quota (PodUsageFunc)."""
    count = {"count/pods": Quantity(1)}
    if is_terminal(pod):
        return count  # finished pods hold only their object count
    spec = pod.get("spec") or {}
    usage: Usage = {"pods": Quantity(1), **count}
    for name, q in _pod_side(spec, "requests").items():
        if name in ("cpu", "memory", "ephemeral-storage"):
            usage[name] = q
            usage[f"requests.{name}"] = q
        elif "/" in name or name.startswith("hugepages-"):
            usage[f"requests.{name}"] = q  # extended resources: only with the prefix
    for name, q in _pod_side(spec, "limits").items():
        if name in ("cpu", "memory", "ephemeral-storage"):
            usage[f"limits.{name}"] = q
    return usage


def service_usage(service: Obj) -> Usage:
    spec = service.get("spec") or {}
    usage: Usage = {"services": Quantity(1), "count/services": Quantity(1)}
    kind = spec.get("type", "ClusterIP")
    if kind == "LoadBalancer":
        usage["services.loadbalancers"] = Quantity(1)
    if kind in ("NodePort", "LoadBalancer"):
        usage["services.nodeports"] = Quantity(len(spec.get("ports") or []))
    return usage


def claim_usage(claim: Obj) -> Usage:
    """What a PersistentVolumeClaim counts (the PVC evaluator): one claim and the storage it
    requests, in all and per its storage class."""
    spec = claim.get("spec") or {}
    usage: Usage = {"persistentvolumeclaims": Quantity(1),
                    "count/persistentvolumeclaims": Quantity(1)}
    raw = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    try:
        storage = Quantity.parse(raw) if raw is not None else None
    except ValueError:
        storage = None
    if storage is not None:
        usage["requests.storage"] = storage
    class_name = spec.get("storageClassName")
    if class_name:
        usage[f"{class_name}{CLASS_CLAIMS}"] = Quantity(1)
        if storage is not None:
            usage[f"{class_name}{CLASS_STORAGE}"] = storage
    return usage


def object_usage(rt: ResourceType, obj: Obj) -> Usage:
    if rt is CLAIM:
        return claim_usage(obj)
    if rt is POD:
        return pod_usage(obj)
    if rt is SERVICE:
        return service_usage(obj)
    usage = {count_name(rt): Quantity(1)}
    if not rt.group and rt.plural in _LEGACY_COUNTS:
        usage[_LEGACY_COUNTS[rt.plural]] = Quantity(1)
    return usage


def pretty(usage: dict[str, Quantity]) -> str:
    return ",".join(f"{k}={usage[k]}" for k in sorted(usage))


def exceeded_message(quota_name: str, requested: Usage, used: Usage, hard: Usage) -> str | None:
    """The quota plugin's refusal, or None when `requested` fits."""
    over = sorted(k for k, q in requested.items()
                  if k in hard and (used.get(k, Quantity(0)) + q).value > hard[k].value)
    if not over:
        return None
    return (f"exceeded quota: {quota_name}, requested: {pretty({k: requested[k] for k in over})}, "
            f"used: {pretty({k: used.get(k, Quantity(0)) for k in over})}, "
            f"limited: {pretty({k: hard[k] for k in over})}")


def missing_constraints(pod: Obj, required: set[str]) -> str | None:
    """cpu/memory quotas need every container to state them: `must specify …`."""
    wanted = required.intersection(_VALIDATION)
    if not wanted:
        return None
    missing: dict[str, set[str]] = {}
    spec = pod.get("spec") or {}
    for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        resources = container.get("resources") or {}
        requests = resources.get("requests") or {}
        limits = resources.get("limits") or {}
        for name in wanted:
            if name.startswith("limits."):
                ok = name[len("limits."):] in limits
            else:
                ok = name.removeprefix("requests.") in requests
            if not ok:
                missing.setdefault(name, set()).add(container.get("name", ""))
    if not missing:
        return None
    parts = [f"{name} for: {','.join(sorted(missing[name]))}" for name in sorted(missing)]
    return "must specify " + "; ".join(parts)


def _hard(quota: Obj) -> Usage:
    raw = (quota.get("status") or {}).get("hard") or (quota.get("spec") or {}).get("hard") or {}
    out: Usage = {}
    for name, value in raw.items():
        try:
            out[name] = Quantity.parse(value)
        except ValueError:
            continue
    return out


def apply_limit_ranges(pod: Obj, limit_ranges: list[Obj]) -> None:
    """LimitRanger: fill each container's missing requests/limits from `type: Container`
    defaults (`defaultRequest` falls back to `default`, as the API server defaults it)."""
    for lr in limit_ranges:
        for item in (lr.get("spec") or {}).get("limits") or ():
            if item.get("type") != "Container":
                continue
            # The API server defaults `default` from `max` and `defaultRequest` from `default`.
            default = {**(item.get("max") or {}), **(item.get("default") or {})}
            default_request = {**default, **(item.get("defaultRequest") or {})}
            spec = pod.get("spec") or {}
            for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
                resources = container.setdefault("resources", {})
                limits = dict(resources.get("limits") or {})
                requests = dict(resources.get("requests") or {})
                for name, value in default.items():
                    limits.setdefault(name, value)
                for name, value in default_request.items():
                    requests.setdefault(name, value)
                if limits:
                    resources["limits"] = limits
                if requests:
                    resources["requests"] = requests


class QuotaController:
    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.queue = cluster.make_queue("resourcequota", self.reconcile)
        # What each object contributes, and the namespace totals (kept incrementally).
        self.contrib: dict[tuple[tuple[str, str, str], str, str], Usage] = {}
        self.totals: dict[str, Usage] = {}

    # ------------------------------------------------------------------ usage tracking

    def on_object(self, event: str, rt: ResourceType, obj: Obj) -> None:
        if not rt.namespaced:
            return
        meta = obj["metadata"]
        ns = meta.get("namespace", "")
        ref = (rt.key, ns, meta["name"])
        new = {} if event == "DELETED" else object_usage(rt, obj)
        old = self.contrib.get(ref, {})
        if new == old:
            # Like the real quota controller: a quota is recalculated when its limits differ
            # from what its status says (not on every status write).
            if rt is QUOTA and event != "DELETED" and (
                    (obj.get("spec") or {}).get("hard") != (obj.get("status") or {}).get("hard")):
                self.queue.add(ns)
            return
        totals = self.totals.setdefault(ns, {})
        for name, q in old.items():
            totals[name] = totals.get(name, Quantity(0)) - q
        for name, q in new.items():
            totals[name] = totals[name] + q if name in totals else Quantity(q.value, q.binary)
        if new:
            self.contrib[ref] = new
        else:
            self.contrib.pop(ref, None)
        if rt is QUOTA:
            self.queue.add(ns)
        elif self.cluster.index.names_in(QUOTA, ns):
            # Admission uses the live totals; the status only needs to catch up.
            self.queue.add_after(ns, 0.05)
        if event == "DELETED" or sum(q.value for q in new.values()) < sum(q.value for q in old.values()):
            # Something was freed: controllers whose creations were refused may retry.
            self.cluster.replicasets.retry_namespace(ns)
            self.cluster.jobs.retry_namespace(ns)

    def used(self, namespace: str, names: list[str]) -> Usage:
        totals = self.totals.get(namespace, {})
        return {name: totals.get(name, Quantity(0)) for name in names}

    # ------------------------------------------------------------------ admission

    def admission_hooks(self) -> list[Callable[[str, ResourceType, Obj, Obj | None], None]]:
        return [self.limit_range_hook, self.quota_status_hook, self.quota_hook]

    def limit_range_hook(self, op: str, rt: ResourceType, new: Obj, old: Obj | None) -> None:
        if op != "CREATE" or rt is not POD:
            return
        ns = new["metadata"].get("namespace", "")
        names = sorted(self.cluster.index.names_in(LIMITRANGE, ns))
        ranges = [lr for n in names if (lr := self.cluster.peek(LIMITRANGE, ns, n)) is not None]
        if ranges:
            apply_limit_ranges(new, ranges)

    def quota_status_hook(self, op: str, rt: ResourceType, new: Obj, old: Obj | None) -> None:
        """A quota is written with its status filled in, so admission can use it at once."""
        if rt is not QUOTA:
            return
        hard = (new.get("spec") or {}).get("hard") or {}
        ns = new["metadata"].get("namespace", "")
        status = new.get("status") or {}
        old_hard = ((old or {}).get("spec") or {}).get("hard")
        if op == "UPDATE" and old_hard == hard and status.get("hard") == hard:
            return  # the limits did not change: leave the status as written
        used = self.used(ns, list(hard))
        new["status"] = {"hard": dict(hard), "used": {k: str(v) for k, v in used.items()}}

    def quota_hook(self, op: str, rt: ResourceType, new: Obj, old: Obj | None) -> None:
        if op != "CREATE" or not rt.namespaced:
            return
        ns = new["metadata"].get("namespace", "")
        quota_names = self.cluster.index.names_in(QUOTA, ns)
        if not quota_names:
            return
        requested = {k: q for k, q in object_usage(rt, new).items() if q.value != 0}
        name = new["metadata"].get("name", "")
        for quota_name in sorted(quota_names):
            quota = self.cluster.peek(QUOTA, ns, quota_name)
            if quota is None or not _quota_scope_matches(quota, rt, new):
                continue
            hard = _hard(quota)
            tracked = sorted(k for k in hard if _tracks(rt, k))
            if not tracked:
                continue
            if rt is POD:
                problem = missing_constraints(new, set(tracked))
                if problem:
                    raise forbidden(rt, name, f"failed quota: {quota_name}: {problem}")
            status = quota.get("status") or {}
            status_used = status.get("used") or {}
            if status.get("hard") and any(k not in status_used for k in tracked):
                raise forbidden(rt, name, f"status unknown for quota: {quota_name}, "
                                          f"resources: {','.join(tracked)}")
            asked = {k: q for k, q in requested.items() if k in hard}
            if not asked:
                continue
            message = exceeded_message(quota_name, asked, self.used(ns, list(asked)), hard)
            if message:
                raise forbidden(rt, name, message)

    # ------------------------------------------------------------------ status

    def reconcile(self, namespace: str) -> None:
        for name in sorted(self.cluster.index.names_in(QUOTA, namespace)):
            quota = self.cluster.peek(QUOTA, namespace, name)
            if quota is None:
                continue
            hard = (quota.get("spec") or {}).get("hard") or {}
            used = self.used(namespace, list(hard))
            status = {"hard": dict(hard), "used": {k: str(v) for k, v in used.items()}}
            if status != quota.get("status"):
                self.cluster.write_status(QUOTA, quota, status)

    def snapshot(self, namespace: str) -> dict[str, str]:
        return {k: str(v) for k, v in sorted(self.totals.get(namespace, {}).items()) if v.value}


def _tracks(rt: ResourceType, resource: str) -> bool:
    """Whether the evaluator of `rt` matches a quota resource name (MatchingResources)."""
    if rt is POD:
        return (resource in ("pods", "count/pods", "cpu", "memory", "ephemeral-storage")
                or resource.startswith(("requests.", "limits.")))
    if rt is SERVICE:
        return resource in ("services", "count/services", "services.loadbalancers",
                            "services.nodeports")
    if rt is CLAIM:
        return (resource in ("persistentvolumeclaims", "count/persistentvolumeclaims",
                             "requests.storage")
                or resource.endswith((CLASS_STORAGE, CLASS_CLAIMS)))
    return resource == count_name(rt) or (not rt.group and _LEGACY_COUNTS.get(rt.plural) == resource)


def _quota_scope_matches(quota: Obj, rt: ResourceType, obj: Obj) -> bool:
    """Quota scopes (Terminating, NotTerminating, BestEffort, NotBestEffort) for pods."""
    scopes = (quota.get("spec") or {}).get("scopes") or []
    if not scopes:
        return True
    if rt is not POD:
        return False
    spec = obj.get("spec") or {}
    terminating = spec.get("activeDeadlineSeconds") is not None
    best_effort = (obj.get("status") or {}).get("qosClass") == "BestEffort"
    checks: dict[str, Any] = {
        "Terminating": terminating, "NotTerminating": not terminating,
        "BestEffort": best_effort, "NotBestEffort": not best_effort,
    }
    return all(checks.get(scope, True) for scope in scopes)

