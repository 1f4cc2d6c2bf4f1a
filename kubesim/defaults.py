"""Defaulting the real API server applies on every create and update.

Only what clients and the simulated controllers look at: pod restart/DNS/scheduler fields,
container pull policies, requests copied from limits (quota counts requests), QoS class,
Deployment strategy, Job selectors and counts, Service cluster IPs and target ports,
Namespace phase and name label.
"""

from __future__ import annotations

import base64
import hashlib
from decimal import Decimal
from typing import Any

from kubesim import quantity
from kubesim.resources import ResourceType


def apply(rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    """Fill defaults into `obj` in place (`old` is the stored version on update)."""
    handler = _HANDLERS.get(rt.kind)
    if handler is not None:
        handler(obj, old)


def _image_pull_policy(image: str) -> str:
    last = image.rsplit("/", 1)[-1]
    if "@" in last:
        return "IfNotPresent"
    tag = last.split(":", 1)[1] if ":" in last else "latest"
    return "Always" if tag == "latest" else "IfNotPresent"


def _container(c: Any) -> None:
    if not isinstance(c, dict):
        return
    if isinstance(c.get("image"), str):
        c.setdefault("imagePullPolicy", _image_pull_policy(c["image"]))
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    resources = c.setdefault("resources", {})
    if isinstance(resources, dict) and isinstance(resources.get("limits"), dict):
        # Requests default to limits: what quota admission and the scheduler then count.
        requests = resources.setdefault("requests", {})
        if isinstance(requests, dict):
            for name, value in resources["limits"].items():
                requests.setdefault(name, value)
    for port in c.get("ports") or ():
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")


def _pod_spec(spec: Any) -> None:
    if not isinstance(spec, dict):
        return
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("enableServiceLinks", True)
    for field in ("containers", "initContainers"):
        for c in spec.get(field) or ():
            _container(c)


_QOS_RESOURCES = ("cpu", "memory")
# DefaultTolerationSeconds admission: how long a pod stays on a node that stops reporting
_NODE_PROBLEM_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
_DEFAULT_TOLERATION_SECONDS = 300


def _qos_class(spec: dict[str, Any]) -> str:
    """The pod's QoS class as the API server computes it: only cpu and memory count (a pod
    that asks for nothing but GPUs is BestEffort)."""
    containers = [c for field in ("initContainers", "containers")
                  for c in spec.get(field) or () if isinstance(c, dict)]
    requests: dict[str, Decimal] = {}
    limits: dict[str, Decimal] = {}
    guaranteed = True
    for c in containers:
        res = c.get("resources") or {}
        for source, total in ((res.get("requests") or {}, requests),
                              (res.get("limits") or {}, limits)):
            for name, value in source.items():
                amount = _amount(value)
                if name in _QOS_RESOURCES and amount > 0:
                    total[name] = total.get(name, Decimal(0)) + amount
        found = {name for name, value in (res.get("limits") or {}).items()
                 if name in _QOS_RESOURCES and _amount(value) > 0}
        if found != set(_QOS_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and all(limits.get(name) == value for name, value in requests.items()) \
            and len(requests) == len(limits):
        return "Guaranteed"
    return "Burstable"


def _amount(value: Any) -> Decimal:
    try:
        return quantity.parse(value)
    except (ValueError, ArithmeticError):
        return Decimal(0)


def _default_tolerations(spec: dict[str, Any]) -> None:
    """DefaultTolerationSeconds admission: tolerate a not-ready or unreachable node for
    300 s unless the pod already says otherwise."""
    tolerations = spec.get("tolerations")
    if tolerations is None:
        tolerations = []
    if not isinstance(tolerations, list):
        return
    added = False
    for key in _NODE_PROBLEM_TAINTS:
        if any(isinstance(t, dict) and t.get("key") == key
               and t.get("effect", "") in ("", "NoExecute") for t in tolerations):
            continue
        tolerations.append({"key": key, "operator": "Exists", "effect": "NoExecute",
                            "tolerationSeconds": _DEFAULT_TOLERATION_SECONDS})
        added = True
    if added:
        spec["tolerations"] = tolerations


def _pod(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    spec = obj.get("spec")
    _pod_spec(spec)
    if isinstance(spec, dict):
        spec.setdefault("serviceAccountName", spec.get("serviceAccount") or "default")
        # the deprecated alias the real API keeps in step
        spec.setdefault("serviceAccount", spec["serviceAccountName"])
        spec.setdefault("priority", 0)
        spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
        if old is None:
            _default_tolerations(spec)
    if old is None:
        status = obj.setdefault("status", {})
        if isinstance(status, dict):
            status.setdefault("phase", "Pending")
            if isinstance(spec, dict):
                status.setdefault("qosClass", _qos_class(spec))


def _template(obj: dict[str, Any]) -> None:
    spec = obj.get("spec")
    if isinstance(spec, dict) and isinstance(spec.get("template"), dict):
        _pod_spec(spec["template"].get("spec"))


def _deployment(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    spec.setdefault("replicas", 1)
    strategy = spec.setdefault("strategy", {"type": "RollingUpdate"})
    if isinstance(strategy, dict) and strategy.get("type", "RollingUpdate") == "RollingUpdate":
        strategy.setdefault("type", "RollingUpdate")
        strategy.setdefault("rollingUpdate", {"maxUnavailable": "25%", "maxSurge": "25%"})
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    _template(obj)


def _replicaset(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    spec = obj.get("spec")
    if isinstance(spec, dict):
        spec.setdefault("replicas", 1)
    _template(obj)


def _job(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    if "completions" not in spec and "parallelism" not in spec:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    meta = obj.get("metadata") or {}
    uid, name = meta.get("uid"), meta.get("name")
    if not spec.get("manualSelector") and uid:
        # The real server pins a Job's pods with generated controller-uid labels.
        spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
        template = spec.get("template")
        if isinstance(template, dict):
            tmeta = template.setdefault("metadata", {})
            if isinstance(tmeta, dict):
                labels = tmeta.setdefault("labels", {})
                if isinstance(labels, dict):
                    labels["batch.kubernetes.io/controller-uid"] = uid
                    labels["controller-uid"] = uid
                    labels["batch.kubernetes.io/job-name"] = name
                    labels["job-name"] = name
    _template(obj)


def _cluster_ip(uid: str) -> str:
    # Stable per object and spread over 10.96.0.0/16; collisions are harmless here.
    digest = hashlib.sha256(uid.encode()).digest()
    return f"10.96.{digest[0]}.{max(1, digest[1])}"


def _node_port(uid: str, index: int) -> int:
    digest = hashlib.sha256(f"{uid}/{index}".encode()).digest()
    return 30000 + int.from_bytes(digest[:2], "big") % 2768


def _service(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    old_spec = (old or {}).get("spec") or {}
    svc_type = spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    uid = (obj.get("metadata") or {}).get("uid", "")
    if svc_type != "ExternalName":
        if not spec.get("clusterIP"):
            spec["clusterIP"] = old_spec.get("clusterIP") or _cluster_ip(uid)
        spec.setdefault("clusterIPs", [spec["clusterIP"]])
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
        spec.setdefault("internalTrafficPolicy", "Cluster")
    old_ports = {p.get("port"): p for p in old_spec.get("ports") or () if isinstance(p, dict)}
    for i, port in enumerate(spec.get("ports") or ()):
        if not isinstance(port, dict):
            continue
        port.setdefault("protocol", "TCP")
        if "port" in port:
            port.setdefault("targetPort", port["port"])
        if svc_type in ("NodePort", "LoadBalancer") and not port.get("nodePort"):
            port["nodePort"] = old_ports.get(port.get("port"), {}).get("nodePort") or _node_port(
                uid, i
            )
    if svc_type in ("NodePort", "LoadBalancer"):
        spec.setdefault("externalTrafficPolicy", "Cluster")
    if svc_type == "LoadBalancer":
        spec.setdefault("allocateLoadBalancerNodePorts", True)
    if old is None:
        obj.setdefault("status", {"loadBalancer": {}})


def _namespace(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    meta = obj.get("metadata") or {}
    labels = meta.setdefault("labels", {})
    if isinstance(labels, dict) and meta.get("name"):
        labels["kubernetes.io/metadata.name"] = meta["name"]
    spec = obj.setdefault("spec", {})
    if isinstance(spec, dict):
        spec.setdefault("finalizers", ["kubernetes"])
    if old is None:
        obj.setdefault("status", {"phase": "Active"})


def _secret(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    obj.setdefault("type", "Opaque")
    # `stringData` is write-only: the API server merges it into `data` (base64) and keeps
    # only `data`; on a key in both, stringData wins.
    string_data = obj.pop("stringData", None)
    if isinstance(string_data, dict) and string_data:
        data = obj.get("data")
        if not isinstance(data, dict):
            data = obj["data"] = {}
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()


def _pvc(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    spec = obj.get("spec")
    if isinstance(spec, dict):
        spec.setdefault("volumeMode", "Filesystem")
    if old is None:
        obj.setdefault("status", {"phase": "Pending"})


_HANDLERS = {
    "Pod": _pod,
    "Deployment": _deployment,
    "ReplicaSet": _replicaset,
    "Job": _job,
    "Service": _service,
    "Namespace": _namespace,
    "Secret": _secret,
    "PersistentVolumeClaim": _pvc,
}
