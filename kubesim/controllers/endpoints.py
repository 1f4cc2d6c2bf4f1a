"""Endpoints controller: each Service with a selector gets an Endpoints object listing the
IPs of its pods, ready ones under `addresses`, the others under `notReadyAddresses`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubesim.controllers.common import is_ready
from kubesim.errors import ApiError
from kubesim.resources import Obj, by_kind
from kubesim.scheduler import is_terminal
from kubesim.store import clone
from kubesim.workqueue import coalesce_delay

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

SERVICE = by_kind("Service")
ENDPOINTS = by_kind("Endpoints")
POD = by_kind("Pod")

Key = tuple[str, str]


def _selects(selector: Obj, labels: Obj | None) -> bool:
    labels = labels or {}
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def _target_port(port: Obj, pod: Obj) -> int | None:
    target = port.get("targetPort", port.get("port"))
    if isinstance(target, int):
        return target
    if isinstance(target, str) and target.isdigit():
        return int(target)
    for container in (pod.get("spec") or {}).get("containers") or ():
        for cport in container.get("ports") or ():
            if cport.get("name") == target:
                number: int | None = cport.get("containerPort")
                return number
    return None


def build_subsets(service: Obj, pods: list[Obj]) -> list[Obj]:
    """Group pod addresses by their resolved ports, as the real controller does."""
    ports = (service.get("spec") or {}).get("ports") or []
    groups: dict[tuple[tuple[int, str], ...], Obj] = {}  # by the (port, name)s resolved
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        ip = (pod.get("status") or {}).get("podIP")
        if not ip:
            continue
        resolved = []
        for port in ports:
            number = _target_port(port, pod)
            if number is None:
                continue
            entry = {"port": number, "protocol": port.get("protocol", "TCP")}
            if port.get("name"):
                entry["name"] = port["name"]
            resolved.append(entry)
        group = groups.setdefault(tuple(sorted((p["port"], p.get("name", "")) for p in resolved)),
                                  {"ports": resolved})
        address = {
            "ip": ip,
            "nodeName": (pod.get("spec") or {}).get("nodeName", ""),
            "targetRef": {"kind": "Pod", "namespace": pod["metadata"]["namespace"],
                          "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]},
        }
        group.setdefault("addresses" if is_ready(pod) else "notReadyAddresses", []).append(address)
    subsets = []
    for group in groups.values():
        if not group["ports"]:
            group.pop("ports")
        subsets.append(group)
    return subsets


class EndpointsController:
    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.queue = cluster.make_queue("endpoints", self.reconcile)
        # namespace -> service name -> selector, to map a pod event to its services quickly
        self.selectors: dict[str, dict[str, Obj]] = {}
        self.sizes: dict[Key, int] = {}  # pods per Service at its last reconcile

    def on_service(self, event: str, service: Obj) -> None:
        ns, name = service["metadata"]["namespace"], service["metadata"]["name"]
        selector = (service.get("spec") or {}).get("selector") or {}
        if event == "DELETED":
            self.selectors.get(ns, {}).pop(name, None)
            self.sizes.pop((ns, name), None)
        elif selector:
            self.selectors.setdefault(ns, {})[name] = dict(selector)
        else:
            self.selectors.get(ns, {}).pop(name, None)
        self.queue.add((ns, name))

    def on_pod(self, event: str, pod: Obj) -> None:
        ns = pod["metadata"]["namespace"]
        labels = pod["metadata"].get("labels")
        for name, selector in self.selectors.get(ns, {}).items():
            if _selects(selector, labels):
                key = (ns, name)
                self.queue.add_after(key, coalesce_delay(self.sizes.get(key, 0)))

    def reconcile(self, key: Key) -> None:
        ns, name = key
        service = self.cluster.peek(SERVICE, ns, name)
        existing = self.cluster.peek(ENDPOINTS, ns, name)
        selector = ((service or {}).get("spec") or {}).get("selector") or {}
        if service is None or not selector:
            # Services without a selector own manually managed Endpoints: leave those alone.
            if service is None and existing is not None and existing["metadata"].get(
                    "labels", {}).get("endpoints.kubernetes.io/managed-by") == "endpoint-controller":
                try:
                    self.cluster.store.delete(ENDPOINTS, ns, name)
                except ApiError as exc:
                    if exc.code != 404:
                        raise
            return
        pods = []
        for pod_name in self.cluster.index.names_in(POD, ns):
            pod = self.cluster.peek(POD, ns, pod_name)
            if (pod is not None and _selects(selector, pod["metadata"].get("labels"))
                    and not is_terminal(pod) and not pod["metadata"].get("deletionTimestamp")):
                pods.append(pod)
        self.sizes[key] = len(pods)
        subsets = build_subsets(service, pods)
        labels = dict(service["metadata"].get("labels") or {})
        labels["endpoints.kubernetes.io/managed-by"] = "endpoint-controller"
        if existing is None:
            body: dict[str, Any] = {"apiVersion": "v1", "kind": "Endpoints",
                    "metadata": {"name": name, "namespace": ns, "labels": labels}}
            if subsets:
                body["subsets"] = subsets
            try:
                self.cluster.store.create(ENDPOINTS, body)
            except ApiError as exc:
                if exc.code not in (404, 409):
                    raise
            return
        if existing.get("subsets", []) == subsets and existing["metadata"].get("labels") == labels:
            return
        new = clone(existing)
        new["metadata"]["labels"] = labels
        if subsets:
            new["subsets"] = subsets
        else:
            new.pop("subsets", None)
        self.cluster.store.update(ENDPOINTS, new, check_rv=False)
